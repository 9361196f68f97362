"""Test doubles for `porter test --device`: a test registers its stand-in for MPS with
`porter.harness.devices.register_backend` and takes it out again with `unregister_backend`,
so that the next test sees the registry porter ships (porter itself never removes a device)."""

from __future__ import annotations

from porter.harness import devices


def unregister_backend(name: str) -> None:
    devices._FACTORIES.pop(name, None)
