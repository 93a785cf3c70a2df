"use strict";
module.exports = require("./lib/report");
