"""`fsmem config --local`: show and set this host's own settings (`fsmem.history.host_settings`).

Only host-local settings are set here: those of fsmem.yaml are the memory's, edited in an editor and
carried by sync; these name this host or run a command on it, and no clone or remote ever brings them.
"""

from __future__ import annotations

from typing import Any

import click

from fsmem.cli.options import command, emit, open_memory, output_option


@command("config")
@click.argument("name", required=False)
@click.argument("value", required=False)
@click.option("--local", "local", is_flag=True, help="This host's own settings (required: the only kind set here).")
@click.option("--unset", is_flag=True, help="Remove the setting NAME on this host.")
@output_option
@click.pass_context
def config_cmd(ctx: click.Context, name: str | None, value: str | None, local: bool, unset: bool, as_json: bool):
    """Show this host's settings, one NAME, or set NAME to VALUE (--unset removes it). They are kept in the
    repository's .git/config (or .fsmem/ without git), never in fsmem.yaml: no sync or clone carries them."""
    from fsmem.errors import InvalidArgument
    from fsmem.history import host_settings

    if not local:
        raise InvalidArgument(
            "fsmem config sets only this host's own settings: add --local (fsmem.yaml is edited as a file)"
        )
    if unset and (name is None or value is not None):
        raise InvalidArgument("--unset takes the NAME of one setting, and no VALUE")
    root = open_memory(ctx).root
    if name is not None and (value is not None or unset):
        host_settings.put(root, name, value)
        if unset:
            emit(HostSettings({}, host_settings.where(root)), as_json)
            return
    if name is not None:
        found = host_settings.get(root, name)
        one = HostSettings({name: found} if found is not None else {}, host_settings.where(root))
        emit(one, as_json, empty=one.empty)  # exit 1 when it is not set, as git config does
        return
    emit(HostSettings(host_settings.every(root), host_settings.where(root)), as_json)


class HostSettings:
    """Host-local settings as `fsmem config --local` prints them: NAME=VALUE lines, and where they are kept."""

    def __init__(self, values: dict[str, str], where: str):
        self.values, self.where = values, where

    @property
    def empty(self) -> bool:
        return not self.values

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.values, "kept_in": self.where}

    def to_text(self) -> str:
        if not self.values:
            return f"(not set; host-local settings are kept in {self.where})"
        return "\n".join(f"{name}={value}" for name, value in self.values.items())
