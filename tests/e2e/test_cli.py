"""The command line a new user meets first: ``offset-sidecar --help`` says how to point it
at Kafka, and every command's help names the settings it reads (each a real setting)."""

from __future__ import annotations

import pytest

from spark_offset_sidecar import cli
from spark_offset_sidecar.settings import Settings

KNOWN = {variable for variable, _default, _meaning in Settings.describe()}


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ended:
        cli.main([*argv, "--help"])
    assert ended.value.code == 0
    return capsys.readouterr().out


def test_the_top_help_says_how_to_reach_kafka_and_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_text(capsys)
    assert "SIDECAR_KAFKA_BOOTSTRAP_SERVERS" in text
    assert "offset-sidecar settings" in text
    for name in cli.COMMANDS:
        assert name in text


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_each_commands_help_names_the_settings_it_reads(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = help_text(capsys, command)
    reads = cli.COMMANDS[command].reads
    assert set(reads) - {"*"} <= KNOWN, "a command names a setting that does not exist"
    for variable in reads:
        assert (variable if variable != "*" else "SIDECAR_KAFKA_BOOTSTRAP_SERVERS") in text
    if command in ("describe-group", "starting-offsets", "serve"):
        assert "SIDECAR_KAFKA_BOOTSTRAP_SERVERS" in text
    if command == "migrate":
        assert "SIDECAR_DATABASE_URL" in text


def test_a_group_command_without_a_group_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["describe-group"])
    assert ended.value.code == 2
    assert "group" in capsys.readouterr().err
