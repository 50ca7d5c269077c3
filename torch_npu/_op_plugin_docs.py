"""The documentation of torch_npu's operators: `help(torch_npu.npu_rms_norm)` shows the operator's schema and what
its kernel documents. Imported by `import torch_npu` for that effect (and removed from the package namespace, as
torch_npu does); operators defined later are documented as they are exported."""

from torch_npu.ops import registration

__all__ = []


def _document(name):
    import torch_npu

    packet = getattr(torch_npu, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return
    schemas = [str(getattr(packet, overload)._schema) for overload in packet.overloads()]
    text = (registration.KERNEL_DOCS.get(name) or "").strip()
    packet.__doc__ = "\n".join(schemas) + ("\n\n" + text if text else "")


def _document_all():
    for name in list(registration.EXPORTED):
        _document(name)
    registration.EXPORT_LISTENERS.append(_document)


_document_all()
