"""Hook settings are checked when the config loads: a pattern that cannot match stops the run at once
instead of leaving a guard hook that silently never fires."""

from __future__ import annotations

import pytest

from keel.config import ConfigError, load_config


@pytest.mark.parametrize("matcher", ["run_shell|edit_file(", "[run_shell", "*shell"])
def test_a_hook_matcher_that_is_not_a_regular_expression_is_a_config_error(tmp_path, matcher):
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.PreToolUse]]\nmatcher = "{matcher}"\ncommand = "true"\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, user_path=user, env={})
    assert "hooks.PreToolUse.0.matcher" in str(err.value) and "not a valid regular expression" in str(err.value)


@pytest.mark.parametrize("matcher", ["", "*", "run_shell", "edit_file|write_file", "mcp__.*"])
def test_usual_matchers_load(tmp_path, matcher):
    user = tmp_path / "config.toml"
    user.write_text(f'[[hooks.PreToolUse]]\nmatcher = "{matcher}"\ncommand = "true"\n')
    config, _ = load_config(tmp_path, user_path=user, env={})
    assert config.hooks.PreToolUse[0].matcher == matcher
