"use strict";

/** A minimal synchronous event emitter. Listeners run in the order they were added. */
class Emitter {
  constructor() {
    this._listeners = new Map();
  }

  /** Call `listener(...args)` on every emit of `event`. Returns this, for chaining. */
  on(event, listener) {
    if (typeof listener !== "function") throw new TypeError("listener must be a function");
    if (!this._listeners.has(event)) this._listeners.set(event, []);
    this._listeners.get(event).push(listener);
    return this;
  }

  /** Like on(), but the listener is removed before its first call. Returns this. */
  once(event, listener) {
    if (typeof listener !== "function") throw new TypeError("listener must be a function");
    const wrapper = function (...args) {
      this.off(event, wrapper);
      return listener.apply(this, args);
    };
    wrapper.listener = listener; // lets off(event, listener) find it
    return this.on(event, wrapper);
  }

  /** Remove the first registration of `listener` (or of a once() wrapper of it) for `event`. Returns this. */
  off(event, listener) {
    const list = this._listeners.get(event);
    if (!list) return this;
    const index = list.findIndex((l) => l === listener || l.listener === listener);
    if (index !== -1) list.splice(index, 1);
    if (list.length === 0) this._listeners.delete(event);
    return this;
  }

  /** Call the listeners of `event`; true when there was at least one. */
  emit(event, ...args) {
    const list = this._listeners.get(event);
    if (!list) return false;
    // A copy: listeners may add or remove listeners while we iterate.
    for (const listener of [...list]) listener.apply(this, args);
    return true;
  }

  listenerCount(event) {
    const list = this._listeners.get(event);
    return list ? list.length : 0;
  }
}

module.exports = { Emitter };
