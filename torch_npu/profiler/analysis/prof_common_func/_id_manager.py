"""The ids the profiler database refers to: STRING_IDS (each text once), CONNECTION_IDS (the launches an operator
made, under one id) and PYTORCH_CALLCHAINS (each distinct Python call stack once)."""

from torch_npu.profiler.analysis.prof_common_func._constant import DbConstant

__all__ = ["Str2IdManager", "ConnectionIdManager", "CallChainIdManager"]


class Str2IdManager:
    """STRING_IDS: a text's id, the same for the same text; an empty text is msprof's invalid value, unless
    keep_empty makes it a text like any other."""

    def __init__(self, keep_empty=False):
        self._ids = {}
        self._keep_empty = keep_empty

    def get_id_from_str(self, text):
        text = "" if text is None else str(text)
        if not text and not self._keep_empty:
            return DbConstant.DB_INVALID_VALUE
        return self._ids.setdefault(text, len(self._ids))

    def get_all_string_dict(self):
        return dict(self._ids)


class ConnectionIdManager:
    """CONNECTION_IDS: one id per group of connection ids (an operator's launches)."""

    def __init__(self):
        self._groups = []

    def get_id_from_connection_ids(self, connection_ids):
        self._groups.append(list(connection_ids))
        return len(self._groups) - 1

    def get_connection_ids_from_id(self, group_id):
        return self._groups[group_id]

    def get_all_connection_ids(self):
        return dict(enumerate(self._groups))


class CallChainIdManager:
    """PYTORCH_CALLCHAINS: one id per distinct call stack, its frames ";\\r\\n"-separated, outermost first; each
    frame kept with its depth."""

    SEPARATOR = ";\r\n"

    def __init__(self):
        self._ids = {}

    def get_callchain_id_from_callstack(self, callstack):
        if not callstack:
            return DbConstant.DB_INVALID_VALUE
        return self._ids.setdefault(callstack, len(self._ids))

    def get_all_callchain_id(self):
        return {
            chain_id: [(frame, depth) for depth, frame in enumerate(stack.split(self.SEPARATOR))]
            for stack, chain_id in self._ids.items()
        }
