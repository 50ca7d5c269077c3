"""What the installed CANN toolkit's profiling exporter can write. On a card torch_npu asks ``msprof --help``;
vnpu's own exporter writes the database (ascend_pytorch_profiler_*.db) when export_type asks for "db", and a
text export writes no database alongside."""

__all__ = []


class CannPackageManager:
    SUPPORT_EXPORT_DB = True
    SUPPORT_DEFAULT_EXPORT_DB = False

    @classmethod
    def is_support_export_db(cls) -> bool:
        return cls.SUPPORT_EXPORT_DB

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        return cls.SUPPORT_DEFAULT_EXPORT_DB
