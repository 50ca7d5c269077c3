"""torchair.CompilerConfig and its sections (the options torchair users set most).

On Ascend these options drive GE graph compilation and aclgraph capture. On vnpu:
* `mode` is honoured: "max-autotune" runs the AOT-autograd ATen graphs the GE compiler would get,
  "reduce-overhead" captures and replays them as NPU graphs;
* `debug.graph_dump.type` / `.path` are honoured: the FX graph is written (as text for "txt" and
  "pbtxt", as Python for "py"; vnpu has no GE protobuf to write);
* `experimental_config.frozen_parameter` is honoured (parameters are static graph inputs);
* every other option is validated and recorded, and changes nothing here (it selects GE passes,
  kernels or runtime features of the card).
"""

from torchair._options import IntRangeValue, NpuBaseConfig, OptionValue

__all__ = ["CompilerConfig"]


class _Dump(NpuBaseConfig):
    def __init__(self, types):
        self.type = OptionValue(None, types)
        self.path = OptionValue(None, None)
        super().__init__()

    @property
    def enabled(self):
        return self.type.value is not None


class _DebugConfig(NpuBaseConfig):
    def __init__(self):
        self.graph_dump = _Dump(["txt", "pbtxt", "py"])
        self.data_dump = _Dump(["npy"])
        self.fx_summary = _Dump(["csv"])
        self.run_eagerly = OptionValue(False, [True, False])
        super().__init__()


class _ExperimentalConfig(NpuBaseConfig):
    def __init__(self):
        self.cc_parallel_enable = OptionValue(False, [False, True])
        self.keep_inference_input_mutations = OptionValue(True, [True, False])
        self.memory_efficiency = OptionValue(False, [True, False])
        self.frozen_parameter = OptionValue(False, [True, False])
        self.static_model_ops_lower_limit = IntRangeValue(None, -1, 9223372036854775807)
        self.jit_compile = OptionValue("auto", ["auto"])
        self.npu_fx_pass = OptionValue(False, [True, False])
        self.enable_single_stream = OptionValue(False, [True, False])
        self.topology_sorting_strategy = OptionValue("DFS", ["BFS", "DFS", "RDFS", "StableRDFS"])
        self.enable_ref_data = OptionValue(False, [True, False])
        self.enable_view_optimize = OptionValue(False, [True, False])
        self.tiling_schedule_optimize = OptionValue(False, [True, False])
        super().__init__()


class _InferenceConfig(NpuBaseConfig):
    def __init__(self):
        self.dynamic_gears_merge_policy = OptionValue("product", ["product", "zip"])
        super().__init__()


class _GEConfig(NpuBaseConfig):
    def __init__(self):
        self.enable_single_stream = OptionValue(False, [True, False])
        self.oo_level = OptionValue("O3", ["O1", "O3"])
        self.oo_constant_folding = OptionValue(None, [True, False])
        self.oo_dead_code_elimination = OptionValue(None, [True, False])
        self.export_compile_stat = OptionValue("2", ["0", "1", "2"])
        self.aicore_num = OptionValue(None, None)
        self.optimization_switch = OptionValue(None, None)
        super().__init__()


class _AclGraphConfig(NpuBaseConfig):
    def __init__(self):
        self.use_custom_pool = OptionValue(None, None)
        self.disable_reinplace_inplaceable_ops_pass = OptionValue(False, [True, False])
        self.disable_reinplace_input_mutated_ops_pass = OptionValue(False, [True, False])
        super().__init__()


class _DataDumpConfig(NpuBaseConfig):
    def __init__(self):
        self.enable_dump = OptionValue(False, [True, False])
        self.dump_path = OptionValue("./", None)
        self.dump_mode = OptionValue("all", ["input", "output", "all"])
        self.quant_dumpable = OptionValue(False, [True, False])
        super().__init__()


class _ExportConfig(NpuBaseConfig):
    def __init__(self):
        self.export_mode = OptionValue(False, [True, False])
        self.export_path_dir = OptionValue(None, None)
        self.export_name = OptionValue(None, None)
        super().__init__()


class _AoeConfig(NpuBaseConfig):
    def __init__(self):
        self.aoe_mode = OptionValue(None, ["2"])
        self.work_path = OptionValue("./", None)
        self.aoe_config_file = OptionValue(None, None)
        super().__init__()


class _FusionConfig(NpuBaseConfig):
    def __init__(self):
        self.fusion_switch_file = OptionValue(None, None)
        super().__init__()


class CompilerConfig(NpuBaseConfig):
    """The graph-mode configuration get_npu_backend takes."""

    def __init__(self):
        self.debug = _DebugConfig()
        self.aoe_config = _AoeConfig()
        self.export = _ExportConfig()
        self.dump_config = _DataDumpConfig()
        self.fusion_config = _FusionConfig()
        self.experimental_config = _ExperimentalConfig()
        self.inference_config = _InferenceConfig()
        self.ge_config = _GEConfig()
        self.aclgraph_config = _AclGraphConfig()
        self.mode = OptionValue("max-autotune", ["max-autotune", "reduce-overhead"])
        super().__init__()

    def __eq__(self, other):
        return isinstance(other, CompilerConfig) and self.as_dict() == other.as_dict()

    __hash__ = None
