// A small, strict, allocation-free JSON reader: a cursor that walks the bytes of one value and lets
// the caller pull the structure it expects. Records have a fixed layout, so pulling beats building a
// DOM: no allocation per value, and a precise "expected X" error at the byte where the input went wrong.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tcl {

// What went wrong and where (byte offset into the text handed to the cursor).
struct JsonError : std::runtime_error {
  size_t offset;
  JsonError(const std::string& what, size_t off) : std::runtime_error(what), offset(off) {}
};

class Cursor {
 public:
  Cursor(const char* begin, const char* end) : begin_(begin), p_(begin), end_(end) {}
  explicit Cursor(std::string_view s) : Cursor(s.data(), s.data() + s.size()) {}

  void skip_ws() {
    // Any byte above ' ' ends the run: one comparison in the common case of no space.
    while (p_ < end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }
  // Next non-space byte, or 0 at the end.
  char peek() {
    skip_ws();
    return p_ < end_ ? *p_ : '\0';
  }
  bool consume(char c) {
    if (peek() == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool at_end() { return peek() == '\0'; }

  // Arrays: call begin_array(), then `while (next_item(first)) {...}` to visit the items.
  void begin_array() { expect('['); }
  bool next_item(bool& first) {
    if (first) {
      first = false;
      if (consume(']')) return false;
      return true;
    }
    if (consume(',')) return true;
    expect(']');
    return false;
  }

  // A number the caller uses. Plain integers (most of a schedule) are read here, inline; anything
  // else by number_slow(). A literal beyond the double range (1e400) fails here: an infinity would
  // only turn into inf/NaN features and scores downstream.
  double number() { return scan_number(true); }
  int64_t integer();  // fails on fractions and on values outside the int64 range
  bool is_number_start() {
    char c = peek();
    return c == '-' || (c >= '0' && c <= '9');
  }
  // Returns the string's content; escapes are decoded into `scratch` only when present.
  std::string_view string(std::string& scratch);
  // Skips one value of any kind; returns its raw text. Numbers it skips may be out of range.
  std::string_view skip_value();
  bool null_literal();  // consumes `null` if it is next
  bool boolean();       // consumes true/false, fails otherwise

  // Nesting depth bookkeeping for callers that recurse themselves.
  void enter() {
    if (++depth_ > kMaxDepth) fail("nesting too deep");
  }
  void leave() { --depth_; }

  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  const char* pos() const { return p_; }
  [[noreturn]] void fail(const std::string& what) const;
  // Fails with the cursor put back at `at` (the start of the offending value), so that the column
  // and the quoted text point at the value rather than past it.
  [[noreturn]] void fail_at(const char* at, const std::string& what) {
    p_ = at;
    fail(what);
  }

 protected:  // the str(trace) text parser's cursor (trace_text.cc) extends this one
  const char* begin_;
  const char* p_;
  const char* end_;

 private:
  // finite: fail on a literal beyond the double range instead of returning +-inf.
  double scan_number(bool finite) {
    skip_ws();
    const char* s = p_;
    bool neg = s < end_ && *s == '-';
    if (neg) ++s;
    uint64_t v = 0;
    const char* q = s;
    while (q < end_ && *q >= '0' && *q <= '9' && q - s < 18) v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    if (q == s || (q < end_ && (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9'))))
      return number_slow(finite);
    p_ = q;
    double d = static_cast<double>(v);
    return neg ? -d : d;
  }
  void literal(const char* word);
  double number_slow(bool finite);
  static constexpr int kMaxDepth = 256;
  int depth_ = 0;
};

}  // namespace tcl
