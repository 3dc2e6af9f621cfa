"""The flashjit operators (torch.ops.flashjit.*), registered on torch's dispatcher directly.

torch.library.custom_op wraps each call in Python layers on several dispatch keys (its checks,
an autograd wrapper, the backend), several microseconds per call; registering through
torch.library.Library gives the same schema (inferred from the implementation's annotations), the
same fake implementation for torch.compile and meta tensors, and an autograd kernel, with one
Python hop per eager call under inference_mode.
"""

import torch

_LIB = torch.library.Library("flashjit", "DEF")


def define(name: str, impl, fake, public_name: str):
    """Defines flashjit::`name` with the schema of `impl`'s annotations (no argument mutated),
    `impl` for every device (it raises for tensors its kernels cannot take), `fake` for tracing,
    and a backward that raises: flashjit is forward only. Returns the OpOverloadPacket."""
    _LIB.define(name + torch.library.infer_schema(impl, mutates_args=()))
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    qualname = "flashjit::" + name
    torch.library.register_fake(qualname, fake, lib=_LIB)
    message = (f"{public_name} is forward only: it has no backward kernel. Run it under torch.no_grad() or "
               "torch.inference_mode(), or pass tensors that do not require grad")

    def backward(ctx, *grads):
        raise RuntimeError(message)

    torch.library.register_autograd(qualname, backward, setup_context=lambda ctx, inputs, output: None, lib=_LIB)
    return getattr(torch.ops.flashjit, name)
