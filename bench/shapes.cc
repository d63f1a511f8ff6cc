// Reading the shapes file and building the list of cases (see shapes.h).
#include "shapes.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "json.h"

namespace fusekit::bench {
namespace {

Status bad(const std::string& path, const std::string& what) {
  return Status::invalid_argument("shapes file " + path + ": " + what);
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A list of positive integers under `key`, or the override when one was given.
Status int_list(const std::string& path, const std::string& section, const JsonValue& sec,
                const char* key, const std::vector<int64_t>& override_with,
                std::vector<int64_t>* out) {
  if (!override_with.empty()) {
    *out = override_with;
    return Status();
  }
  const JsonValue* v = sec.find(key);
  if (v == nullptr || v->type != JsonValue::Type::kArray) {
    return bad(path, section + "." + key + ": expected an array of integers");
  }
  out->clear();
  for (const JsonValue& e : v->array) {
    if (e.type != JsonValue::Type::kNumber || e.number < 1 || e.number > 9.0e15 ||
        e.number != std::floor(e.number)) {
      return bad(path, section + "." + key + ": expected positive integers");
    }
    out->push_back(static_cast<int64_t>(e.number));
  }
  return Status();
}

}  // namespace

bool parse_dtype(const std::string& name, DType* dtype) {
  if (name == "bf16" || name == "bfloat16") *dtype = DType::kBFloat16;
  else if (name == "fp16" || name == "float16" || name == "half") *dtype = DType::kFloat16;
  else if (name == "fp32" || name == "float32" || name == "float") *dtype = DType::kFloat32;
  else return false;
  return true;
}

bool parse_fp8_format(const std::string& name, Fp8Format* format) {
  if (name == "e4m3fn") *format = Fp8Format::kE4M3FN;
  else if (name == "e4m3fnuz") *format = Fp8Format::kE4M3FNUZ;
  else return false;
  return true;
}

const char* short_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
    case DType::kFloat32: return "fp32";
    default: return dtype_name(dtype);
  }
}

std::string known_op_names() {
  std::string names;
  for (const FamilySpec& f : op_families())
    for (const OpSpec& op : f.ops) names += (names.empty() ? "" : ",") + std::string(op.name);
  return names;
}

Status make_plan(const PlanOptions& o, Plan* plan) {
  *plan = Plan();
  plan->row_pad = o.row_pad;
  for (const std::string& name : o.ops) {
    bool known = false;
    for (const FamilySpec& f : op_families())
      for (const OpSpec& op : f.ops) known = known || name == op.name;
    if (!known) {
      return Status::invalid_argument("--ops: unknown op '" + name + "'; known: " +
                                      known_op_names());
    }
  }
  DType forced = DType::kBFloat16;
  if (!o.dtype.empty() && !parse_dtype(o.dtype, &forced)) {
    return Status::invalid_argument("--dtype: expected bf16, fp16 or fp32 but got '" + o.dtype +
                                    "'");
  }
  Fp8Format fp8_format = Fp8Format::kE4M3FN;
  if (!o.fp8.empty() && !parse_fp8_format(o.fp8, &fp8_format)) {
    return Status::invalid_argument("--fp8: expected e4m3fn or e4m3fnuz but got '" + o.fp8 + "'");
  }

  std::ifstream in(o.path, std::ios::binary);
  if (!in) return Status::invalid_argument("cannot open shapes file " + o.path);
  std::ostringstream text;
  text << in.rdbuf();
  JsonValue root;
  std::string error;
  if (!JsonReader::parse(text.str(), &root, &error)) return bad(o.path, error);
  if (root.type != JsonValue::Type::kObject) return bad(o.path, "expected a top-level object");

  for (const auto& member : root.object) {
    const std::string& section = member.first;
    const JsonValue& sec = member.second;
    if (sec.type != JsonValue::Type::kObject) continue;  // "about" and other annotations
    const JsonValue* ops = sec.find("ops");
    if (ops == nullptr || ops->type != JsonValue::Type::kArray) {
      return bad(o.path, section + ".ops: expected an array of op names");
    }
    std::vector<std::string> listed;
    for (const JsonValue& e : ops->array) {
      if (e.type != JsonValue::Type::kString) {
        return bad(o.path, section + ".ops: expected strings");
      }
      listed.push_back(e.string);
    }
    const FamilySpec* family = nullptr;
    for (const FamilySpec& f : op_families())
      if (section == f.section) family = &f;
    if (family == nullptr) {
      std::string names;
      for (const std::string& s : listed) names += (names.empty() ? "" : ", ") + s;
      plan->notes.push_back("section '" + section + "' skipped: no op family the benchmark "
                            "knows (" + names + ")");
      continue;
    }
    for (const std::string& s : listed) {
      bool known = false;
      for (const OpSpec& op : family->ops) known = known || s == op.shapes_name;
      if (!known) plan->notes.push_back("op '" + s + "' in section '" + section + "' skipped: "
                                        "not known to the benchmark");
    }

    std::vector<int64_t> ms, ns;
    Status s = int_list(o.path, section, sec, "M", o.m, &ms);
    if (s.ok()) s = int_list(o.path, section, sec, "N", o.n, &ns);
    if (!s.ok()) return s;
    int64_t limit = 0;
    if (const JsonValue* v = sec.find("skip_if_bytes_over")) {
      if (v->type != JsonValue::Type::kNumber || v->number < 0) {
        return bad(o.path, section + ".skip_if_bytes_over: expected a non-negative number");
      }
      limit = static_cast<int64_t>(v->number);
    }
    DType dtype = DType::kBFloat16;
    if (!o.dtype.empty()) {
      dtype = forced;
    } else if (const JsonValue* v = sec.find("dtype")) {
      if (v->type != JsonValue::Type::kString || !parse_dtype(v->string, &dtype)) {
        return bad(o.path, section + ".dtype: expected \"bf16\", \"fp16\" or \"fp32\"");
      }
    }

    for (const OpSpec& op : family->ops) {
      const bool selected = o.ops.empty() ? contains(listed, op.shapes_name)
                                          : contains(o.ops, op.name);
      if (!selected) continue;
      for (const int64_t n : ns) {
        for (const int64_t m : ms) {
          // The op's bytes and each slot's allocation are int64 products of M, N and the row
          // pad; past 2^62 (in double, which cannot wrap) they would wrap around instead.
          const double elem = static_cast<double>(dtype_size(dtype));
          const double widest = static_cast<double>(m) * (2.0 * n + o.row_pad) * elem;
          if (8 * widest + 8 * static_cast<double>(n) * elem > 4.0e18) {
            return Status::invalid_argument(
                std::string(op.name) + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
                ": more bytes per call than a 64-bit count holds");
          }
          Case c{family, &op, m, n, dtype, op.bytes(m, n, static_cast<int64_t>(dtype_size(dtype))),
                 fp8_format};
          std::string reason;
          if (limit > 0 && c.bytes > limit) {
            reason = "over skip_if_bytes_over (" + std::to_string(limit) + ")";
          } else if (o.max_bytes > 0 && c.bytes > o.max_bytes) {
            reason = "over --max-bytes (" + std::to_string(o.max_bytes) + ")";
          }
          if (reason.empty()) plan->cases.push_back(c);
          else plan->skipped.push_back(Skipped{op.name, m, n, c.bytes, reason});
        }
      }
    }
  }
  return Status();
}

}  // namespace fusekit::bench
