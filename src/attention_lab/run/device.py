"""The `device` knob (or a trainer preset's accelerator) as a Lightning accelerator."""

from __future__ import annotations

from attention_lab.errors import ConfigError


def resolve_accelerator(device: str, preset: str | None = None) -> str:
    """The `device` knob (or a trainer preset's accelerator) as a Lightning accelerator; fails early when the
    hardware isn't there. Imports torch only when a device is named."""
    if preset is None and device == "auto":
        import torch

        if torch.cuda.is_available():
            return "gpu"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    import torch

    wanted, setting = (preset, f"trainer.accelerator={preset}") if preset else (device, f"device={device}")
    instead = "use trainer=default (device=auto) or trainer=cpu" if preset else "use device=cpu or device=auto"
    if wanted in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{setting} is invalid: no CUDA GPU is visible to torch here; {instead}")
    if wanted == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{setting} is invalid: Apple's MPS backend is not available here; {instead}")
    return {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "mps": "mps"}.get(str(wanted), str(wanted))
