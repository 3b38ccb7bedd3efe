// Unicode data tables for the tokenizers (generated into unicode_tables.cc by
// make_unicode_tables.py). All sorted ascending by their first field.
#ifndef BANYAN_MODEL_TOKENIZER_UNICODE_TABLES_H_
#define BANYAN_MODEL_TOKENIZER_UNICODE_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace banyan::model::unicode_tables {

struct Range {
  uint32_t first, last;  // inclusive
};
struct CombiningClass {
  uint32_t code_point;
  uint8_t ccc;  // non-zero
};
// One level of canonical decomposition: code_point -> first [second].
struct Decomposition {
  uint32_t code_point, first, second;  // second == 0: a singleton
};
// Primary composites: (first, second) -> composite.
struct Composition {
  uint32_t first, second, composite;
};

extern const Range kLetterRanges[];
extern const size_t kLetterRangesSize;
extern const Range kNumberRanges[];
extern const size_t kNumberRangesSize;
extern const Range kSpaceRanges[];
extern const size_t kSpaceRangesSize;
extern const CombiningClass kCombiningClasses[];
extern const size_t kCombiningClassesSize;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsSize;
extern const Composition kCompositions[];
extern const size_t kCompositionsSize;
extern const char kUnicodeVersion[];

}  // namespace banyan::model::unicode_tables

#endif  // BANYAN_MODEL_TOKENIZER_UNICODE_TABLES_H_
