#include "json.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace tcl {

void Cursor::fail(const std::string& what) const {
  std::string got;
  if (p_ >= end_) {
    got = "end of input";
  } else {
    size_t n = std::min<size_t>(static_cast<size_t>(end_ - p_), 24);
    got = "'" + std::string(p_, n) + (n < static_cast<size_t>(end_ - p_) ? "...'" : "'");
  }
  throw JsonError(what + " at column " + std::to_string(offset() + 1) + ", found " + got, offset());
}

// Whether a literal that from_chars found out of range is too large (rather than too small): the
// decimal exponent of its first nonzero digit decides, as the two ranges lie far apart.
static bool too_large(const char* p, const char* end) {
  if (p < end && *p == '-') ++p;
  long mag = 0;  // the value is 0.d1d2... * 10^(mag + exponent), d1 its first nonzero digit
  bool nonzero = false, point = false;
  for (; p < end && ((*p >= '0' && *p <= '9') || *p == '.'); ++p) {
    if (*p == '.') {
      point = true;
    } else {
      nonzero = nonzero || *p != '0';
      if (nonzero && !point) ++mag;
      if (!nonzero && point) --mag;
    }
  }
  long exponent = 0;
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    bool neg = p < end && *p == '-';
    if (p < end && (*p == '-' || *p == '+')) ++p;
    for (; p < end && *p >= '0' && *p <= '9'; ++p)
      if (exponent < 1000000) exponent = exponent * 10 + (*p - '0');  // saturates, no overflow
    if (neg) exponent = -exponent;
  }
  return mag + exponent > 0;
}

double Cursor::number_slow(bool finite) {
  const char* s = p_;
  if (s < end_ && *s == '-') ++s;
  if (s >= end_ || *s < '0' || *s > '9') fail("expected a number");
  // from_chars does not accept a leading '+' and is locale-independent: what JSON wants.
  double d = 0;
  auto res = std::from_chars(p_, end_, d);
  if (res.ec == std::errc::result_out_of_range) {
    // Too large (1e999): an error for a value that is used, +-inf for one that is skipped. Too
    // small (1e-999) is not an error: it rounds to a signed zero, as Python's json gives.
    bool large = too_large(p_, res.ptr);
    if (large && finite) fail("number out of range");
    double m = large ? HUGE_VAL : 0.0;
    d = (*p_ == '-') ? -m : m;
  } else if (res.ec != std::errc()) {
    fail("expected a number");
  }
  p_ = res.ptr;
  return d;
}

int64_t Cursor::integer() {
  skip_ws();
  const char* start = p_;
  int64_t v = 0;
  auto res = std::from_chars(p_, end_, v);
  if (res.ec == std::errc::result_out_of_range) fail("integer out of range");
  if (res.ec != std::errc()) fail("expected an integer");
  if (res.ptr < end_ && (*res.ptr == '.' || *res.ptr == 'e' || *res.ptr == 'E')) {
    // An integral value written as a float (e.g. 64.0) is accepted as long as it is integral.
    // The range check comes before the cast: converting an out-of-range double is undefined.
    double d = number();
    if (!(d >= -0x1p63 && d < 0x1p63)) fail_at(start, "integer out of range");
    if (d != std::trunc(d)) fail_at(start, "expected an integer");
    return static_cast<int64_t>(d);
  }
  p_ = res.ptr;
  return v;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string_view Cursor::string(std::string& scratch) {
  expect('"');
  const char* start = p_;
  // Fast path: no escapes, the content is a view into the input.
  while (p_ < end_ && *p_ != '"' && *p_ != '\\') {
    if (static_cast<unsigned char>(*p_) < 0x20) fail("control character inside a string");
    ++p_;
  }
  if (p_ >= end_) fail("unterminated string");
  if (*p_ == '"') {
    std::string_view v(start, static_cast<size_t>(p_ - start));
    ++p_;
    return v;
  }
  scratch.assign(start, static_cast<size_t>(p_ - start));
  while (true) {
    if (p_ >= end_) fail("unterminated string");
    char c = *p_++;
    if (c == '"') break;
    if (static_cast<unsigned char>(c) < 0x20) {
      --p_;
      fail("control character inside a string");
    }
    if (c != '\\') {
      scratch += c;
      continue;
    }
    if (p_ >= end_) fail("unterminated escape");
    char e = *p_++;
    switch (e) {
      case '"': scratch += '"'; break;
      case '\\': scratch += '\\'; break;
      case '/': scratch += '/'; break;
      case 'b': scratch += '\b'; break;
      case 'f': scratch += '\f'; break;
      case 'n': scratch += '\n'; break;
      case 'r': scratch += '\r'; break;
      case 't': scratch += '\t'; break;
      case 'u': {
        auto read4 = [&]() -> uint32_t {
          if (end_ - p_ < 4) fail("short \\u escape");
          uint32_t cp = 0;
          for (int i = 0; i < 4; ++i) {
            int h = hex_value(p_[i]);
            if (h < 0) fail("bad \\u escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          p_ += 4;
          return cp;
        };
        uint32_t cp = read4();
        if (cp >= 0xD800 && cp < 0xDC00 && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
          p_ += 2;
          uint32_t lo = read4();
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else {
            append_utf8(scratch, cp);
            cp = lo;
          }
        }
        append_utf8(scratch, cp);
        break;
      }
      default:
        --p_;
        fail("bad escape in string");
    }
  }
  return scratch;
}

void Cursor::literal(const char* word) {
  size_t n = std::strlen(word);
  if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0)
    fail(std::string("expected '") + word + "'");
  p_ += n;
}

bool Cursor::null_literal() {
  if (peek() != 'n') return false;
  literal("null");
  return true;
}

bool Cursor::boolean() {
  char c = peek();
  if (c == 't') {
    literal("true");
    return true;
  }
  if (c == 'f') {
    literal("false");
    return false;
  }
  fail("expected true or false");
}

std::string_view Cursor::skip_value() {
  char c = peek();
  const char* start = p_;
  std::string scratch;
  switch (c) {
    case '"': string(scratch); break;
    case '[': {
      // Nesting is bounded so hostile input cannot overflow the stack.
      if (++depth_ > kMaxDepth) fail("nesting too deep");
      begin_array();
      bool first = true;
      while (next_item(first)) skip_value();
      --depth_;
      break;
    }
    case '{': {
      if (++depth_ > kMaxDepth) fail("nesting too deep");
      expect('{');
      if (!consume('}')) {
        do {
          string(scratch);
          expect(':');
          skip_value();
        } while (consume(','));
        expect('}');
      }
      --depth_;
      break;
    }
    case 't':
    case 'f': boolean(); break;
    case 'n': null_literal(); break;
    default: scan_number(false);  // a skipped number may be out of range
  }
  return std::string_view(start, static_cast<size_t>(p_ - start));
}

}  // namespace tcl
