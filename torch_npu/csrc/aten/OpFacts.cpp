#include "aten/OpFacts.h"

#include "aten/CpuFallback.h"
#include "aten/HostSync.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace vnpu {
namespace {

bool is_write(const c10::AliasInfo* info) {
  if (info == nullptr) {
    return false;
  }
  if (info->isWrite()) {
    return true;
  }
  for (const auto& contained : info->containedTypes()) {
    if (is_write(&contained)) {
      return true;
    }
  }
  return false;
}

}  // namespace

OpFacts make_op_facts(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string> mixing = {
      "aten::index",
      "aten::index_put_",
      "aten::index_put",
      "aten::_index_put_impl_",
      "aten::_unsafe_index",
      "aten::_unsafe_index_put",
      "aten::copy_",
      "aten::_copy_from",
      "aten::_copy_from_and_resize",
      "aten::_to_copy",
      "aten::set_",
      "aten::copy",
  };
  OpFacts f;
  f.name = schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  f.cpu_fallback = is_cpu_fallback_operator(f.name);
  if (f.cpu_fallback) {
    f.fallback_name = cpu_fallback_report_name(f.name);
  }
  const auto& args = schema.arguments();
  f.num_args = args.size();
  f.num_returns = schema.returns().size();
  f.written.resize(args.size(), 0);
  f.optional_tensor_list.resize(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    f.arg_names.push_back(arg.name());
    auto type = arg.type();
    if (type->kind() == c10::TypeKind::OptionalType) {
      type = type->containedType(0);
    }
    if (type->kind() == c10::TypeKind::GeneratorType) {
      f.generator_args.push_back(static_cast<int>(i));
    }
    if (type->kind() == c10::TypeKind::ListType && type->containedType(0)->kind() == c10::TypeKind::OptionalType) {
      f.optional_tensor_list[i] = 1;
    }
    if (arg.name() == "layout") {
      f.layout_arg = static_cast<int>(i);
    }
    if (is_write(arg.alias_info())) {
      f.written[i] = 1;
      f.writes_arguments = true;
    }
  }
  f.mixes_devices = mixing.count(schema.name()) > 0;
  static const std::unordered_set<std::string> indexing = {
      "aten::index",         "aten::index_put_",        "aten::index_put", "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put",
  };
  f.indexes_by_tensors = indexing.count(schema.name()) > 0;
  f.reads_device_memory_on_host = reads_device_memory_on_host(schema.name());
  // Operands per operator base name (any overload, out= included).
  static const std::unordered_map<std::string, std::pair<CubeClass, std::vector<std::string>>> cube = {
      {"aten::mm", {CubeClass::Matmul, {"self", "mat2"}}},
      {"aten::bmm", {CubeClass::Matmul, {"self", "mat2"}}},
      {"aten::addmm", {CubeClass::Matmul, {"mat1", "mat2"}}},
      {"aten::addmm_", {CubeClass::Matmul, {"mat1", "mat2"}}},
      {"aten::baddbmm", {CubeClass::Matmul, {"batch1", "batch2"}}},
      {"aten::baddbmm_", {CubeClass::Matmul, {"batch1", "batch2"}}},
      {"aten::addbmm", {CubeClass::Matmul, {"batch1", "batch2"}}},
      {"aten::mv", {CubeClass::Matmul, {"self", "vec"}}},
      {"aten::addmv", {CubeClass::Matmul, {"mat", "vec"}}},
      {"aten::convolution", {CubeClass::Convolution, {"input", "weight"}}},
      {"aten::convolution_backward", {CubeClass::Convolution, {"grad_output", "input", "weight"}}},
  };
  auto it = cube.find(schema.name());
  if (it != cube.end()) {
    f.cube_class = it->second.first;
    for (size_t i = 0; i < args.size(); ++i) {
      for (const auto& name : it->second.second) {
        if (args[i].name() == name) {
          f.cube_args.push_back(static_cast<int>(i));
        }
      }
    }
  }
  return f;
}

const OpFacts& op_facts_of(const c10::FunctionSchema& schema) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpFacts>>();
  std::lock_guard<std::mutex> guard(mu);
  auto& slot = (*cache)[&schema];
  if (!slot) {
    slot = std::make_unique<OpFacts>(make_op_facts(schema));
  }
  return *slot;
}

}  // namespace vnpu
