// Just enough JSON for the benchmark: a reader for the shapes file and a writer for results.
//
// The project has no third-party dependencies and the benchmark should not be the first, so this
// is a small recursive-descent reader (objects, arrays, numbers, strings, true/false/null) with
// error messages that give the byte offset, and a streaming writer that handles commas and
// indentation. Not a general-purpose library: no streaming input, no number round-trip promises.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace fusekit::bench {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order

  const JsonValue* find(const std::string& key) const {
    for (const auto& kv : object)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

class JsonReader {
 public:
  // Parses all of `text` into `out`; on failure returns false with `error` set.
  static bool parse(const std::string& text, JsonValue* out, std::string* error) {
    JsonReader r(text);
    bool ok = r.value(out, 0);
    if (ok) {
      r.skip_space();
      if (r.pos_ != text.size()) ok = r.fail("trailing text");
    }
    if (!ok) *error = r.error_;
    return ok;
  }

 private:
  explicit JsonReader(const std::string& text) : s_(text) {}

  bool fail(const char* what) {
    if (error_.empty()) error_ = std::string(what) + " at byte " + std::to_string(pos_);
    return false;
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return fail("invalid literal");
    pos_ += w.size();
    return true;
  }

  bool value(JsonValue* v, int depth) {
    if (depth > 64) return fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) return fail("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v->type = JsonValue::Type::kString;
      return string(&v->string);
    }
    if (c == 't' || c == 'f') {
      v->type = JsonValue::Type::kBool;
      v->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      v->type = JsonValue::Type::kNull;
      return literal("null");
    }
    return number(v);
  }

  bool object(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kObject;
    ++pos_;  // '{'
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    for (;;) {
      skip_space();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key");
      if (!string(&key)) return false;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      v->object.emplace_back(std::move(key), JsonValue());
      if (!value(&v->object.back().second, depth + 1)) return false;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return fail("expected ',' or '}'");
    }
  }

  bool array(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kArray;
    ++pos_;  // '['
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    for (;;) {
      v->array.emplace_back();
      if (!value(&v->array.back(), depth + 1)) return false;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return fail("expected ',' or ']'");
    }
  }

  bool number(JsonValue* v) {
    const std::size_t start = pos_;
    while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos)
      ++pos_;
    if (pos_ == start) return fail("unexpected character");
    const std::string text = s_.substr(start, pos_ - start);
    char* end = nullptr;
    v->type = JsonValue::Type::kNumber;
    v->number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return pos_ = start, fail("invalid number");
    return true;
  }

  static void append_utf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool hex4(uint32_t* cp) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    *cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      *cp <<= 4;
      if (h >= '0' && h <= '9') *cp |= h - '0';
      else if (h >= 'a' && h <= 'f') *cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') *cp |= h - 'A' + 10;
      else return fail("bad \\u escape");
    }
    return true;
  }

  bool string(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') { out->push_back(c); continue; }
      if (pos_ >= s_.size()) return fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00 && s_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            uint32_t low = 0;
            if (!hex4(&low)) return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default: return fail("bad escape");
      }
    }
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  std::string error_;
};

// Writes JSON with two-space indentation; call key() before each value inside an object.
class JsonWriter {
 public:
  JsonWriter& begin_object() { open('{'); return *this; }
  JsonWriter& end_object() { close('}'); return *this; }
  // An inline array stays on one line: for short lists of numbers such as shapes.
  JsonWriter& begin_array(bool inline_list = false) {
    open('[');
    inline_.back() = inline_list;
    return *this;
  }
  JsonWriter& end_array() { close(']'); return *this; }
  JsonWriter& key(const std::string& k) {
    separate();
    quote(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(const std::string& v) { separate(); quote(v); return *this; }
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(bool v) { separate(); out_ += v ? "true" : "false"; return *this; }
  JsonWriter& value(int64_t v) { separate(); out_ += std::to_string(v); return *this; }
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(double v) {  // NaN and infinities have no JSON form: null
    separate();
    if (!std::isfinite(v)) { out_ += "null"; return *this; }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    out_ += buf;
    return *this;
  }
  JsonWriter& null() { separate(); out_ += "null"; return *this; }
  const std::string& str() const { return out_; }

 private:
  void newline() { out_ += '\n'; out_.append(2 * first_.size(), ' '); }
  void separate() {  // before a value or key: comma and newline unless right after a key
    if (after_key_) { after_key_ = false; return; }
    if (!first_.empty()) {
      if (!first_.back()) out_ += inline_.back() ? ", " : ",";
      if (!inline_.back()) newline();
      first_.back() = false;
    }
  }
  void open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    inline_.push_back(false);
  }
  void close(char c) {
    const bool empty = first_.back(), was_inline = inline_.back();
    first_.pop_back();
    inline_.pop_back();
    if (!empty && !was_inline) newline();
    out_ += c;
  }
  void quote(const std::string& s) {
    out_ += '"';
    for (std::size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) {
        // JSON text is UTF-8: a byte that starts no valid sequence (a path or device name in
        // another encoding) would make the whole file unreadable, so it becomes U+FFFD.
        const std::size_t len = utf8_length(s, i);
        if (len == 0) { out_ += "\\ufffd"; ++i; }
        else { out_.append(s, i, len); i += len; }
        continue;
      }
      if (c == '"' || c == '\\') { out_ += '\\'; out_ += static_cast<char>(c); }
      else if (c == '\n') out_ += "\\n";
      else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); out_ += b; }
      else out_ += static_cast<char>(c);
      ++i;
    }
    out_ += '"';
  }
  // The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF), or 0.
  static std::size_t utf8_length(const std::string& s, std::size_t i) {
    const auto at = [&](std::size_t k) {
      return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u;
    };
    const unsigned c = at(i);
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return 0;
    }
    if (at(i + 1) < lo || at(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < len; ++k)
      if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
    return len;
  }

  std::string out_;
  std::vector<bool> first_;   // per open container: no element written yet
  std::vector<bool> inline_;  // per open container: written on one line
  bool after_key_ = false;
};

}  // namespace fusekit::bench
