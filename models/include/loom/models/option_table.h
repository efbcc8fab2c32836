#pragma once
// Options declared once, in a table: each row names an option's flag, the member
// that holds it (whose initializer is its default), its help, the values it may
// take, and what a resumed or data-parallel run does with it. Everything else is
// derived from the rows: the command line (tools/train_command.cpp), the checks,
// the saved state, resume's comparisons and the ranks' agreement. TrainerOptions
// (trainer.h) is one such table; `loom train`'s own options (the model's shape, the
// vocabulary) are another.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "loom/error.h"

namespace loom::models {

// How an update's micro-batch gradients are summed (TrainerOptions::reduce).
enum class MicroBatchSum {
  automatic,  // off for one process, exact for several (the Trainer saves what it resolved)
  off,        // backward after backward into .grad, one process only: the historical bits
  exact,      // a fixed tree over the global micro-batch index, dropout keyed by it: the same bits at any world size
  fast,       // as exact, but the library's own all-reduce across ranks
};
// In MicroBatchSum's order: the names on the command line and in saved states.
inline constexpr std::array<std::string_view, 4> kMicroBatchSumNames = {"auto", "off", "exact", "fast"};
inline std::string_view name_of(MicroBatchSum r) { return kMicroBatchSumNames[static_cast<size_t>(r)]; }

// What a resumed run does with an option.
enum class OnResume {
  kept,        // the updates depend on it: saved, and given again it must equal the run's
  may_change,  // saved; given again, the new value wins
  not_saved,   // this process's own business
};

// The numbers an option may take: lo <= v <= hi, or strictly above lo / below hi.
struct Range {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool above_lo = false, below_hi = false;

  bool contains(double v) const {  // NaN is never in a range
    return (above_lo ? v > lo : v >= lo) && (below_hi ? v < hi : v <= hi);
  }
  // "at least 1 and at most 1048575", "above 0", "at least 0 and below 1".
  std::string describe() const {
    std::string text = fmt::format("{} {}", above_lo ? "above" : "at least", lo);
    if (std::isfinite(hi)) text += fmt::format(" and {} {}", below_hi ? "below" : "at most", hi);
    return text;
  }
};
inline Range at_least(double lo) { return {.lo = lo}; }
inline Range between(double lo, double hi) { return {.lo = lo, .hi = hi}; }

template <typename Owner>
struct OptionField {
  using Member = std::variant<int64_t Owner::*, uint64_t Owner::*, double Owner::*, bool Owner::*, std::string Owner::*,
                              MicroBatchSum Owner::*>;
  const char* flag;  // on the command line: "--max-tokens"
  const char* key;   // in the saved state: "max_tokens"
  Member member;
  const char* help;
  Range range;                            // numbers
  std::vector<std::string_view> choices;  // strings: the values it may take (empty: any); enums: their names
  OnResume on_resume = OnResume::kept;
  bool switch_only = false;  // a bool given bare (--shard-optimizer), not with a value (--overlap off)
  bool show_default = true;  // false where the default means "someone else's" (the preset's)
};

// The option's value as text: numbers as fmt prints them (the shortest form that
// reads back the same), bools as true/false, an enum by its name.
template <typename Owner>
std::string text_of(const Owner& o, const OptionField<Owner>& f) {
  return std::visit(
      [&](auto member) -> std::string {
        if constexpr (std::is_same_v<decltype(member), MicroBatchSum Owner::*>)
          return std::string(name_of(o.*member));
        else
          return fmt::format("{}", o.*member);
      },
      f.member);
}

// Reads `text` (as text_of writes it) into the option; an error names the option and `where`.
template <typename Owner>
void set_from_text(Owner& o, const OptionField<Owner>& f, const std::string& text, std::string_view where) {
  auto refuse = [&] { fail("{}: {} '{}' is not a value of that option", where, f.flag, text); };
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        size_t used = 0;
        try {
          if constexpr (std::is_same_v<T, std::string>) {
            o.*member = text;
            used = text.size();
          } else if constexpr (std::is_same_v<T, bool>) {
            if (text != "true" && text != "false") refuse();
            o.*member = text == "true";
            used = text.size();
          } else if constexpr (std::is_same_v<T, MicroBatchSum>) {
            size_t i = 0;
            while (i < kMicroBatchSumNames.size() && kMicroBatchSumNames[i] != text) ++i;
            if (i == kMicroBatchSumNames.size()) refuse();
            o.*member = static_cast<MicroBatchSum>(i);
            used = text.size();
          } else if constexpr (std::is_same_v<T, double>) {
            o.*member = std::stod(text, &used);
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            o.*member = std::stoull(text, &used);
          } else {
            o.*member = std::stoll(text, &used);
          }
        } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
          refuse();
        }
        if (text.empty() || used != text.size()) refuse();
      },
      f.member);
}

// The option's range or choices, checked: an error "<context>: --flag must be ..., got V".
template <typename Owner>
void check_field(const Owner& o, const OptionField<Owner>& f, std::string_view context) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          bool allowed = f.choices.empty();
          for (std::string_view c : f.choices) allowed = allowed || c == o.*member;
          LOOM_CHECK(allowed, "{}: {} must be one of {}, got '{}'", context, f.flag, fmt::join(f.choices, ", "),
                     o.*member);
        } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          LOOM_CHECK(f.range.contains(static_cast<double>(o.*member)), "{}: {} must be {}, got {}", context, f.flag,
                     f.range.describe(), o.*member);
        }
      },
      f.member);
}

// Where `text` is among the option's choices (their count when it is not).
template <typename Owner>
size_t choice_index(const OptionField<Owner>& f, std::string_view text) {
  size_t i = 0;
  while (i < f.choices.size() && f.choices[i] != text) ++i;
  return i;
}

// The option's value as one number every rank can compare (Communicator::agree):
// integers as they are, a double by its bits, a string by its choice or a digest.
template <typename Owner>
int64_t agreed_value(const Owner& o, const OptionField<Owner>& f) {
  return std::visit(
      [&](auto member) -> int64_t {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        if constexpr (std::is_same_v<T, double>)
          return std::bit_cast<int64_t>(o.*member + 0.0);  // -0.0 as 0.0: its bits would be INT64_MIN
        else if constexpr (std::is_same_v<T, std::string>)
          return f.choices.empty() ? static_cast<int64_t>(std::hash<std::string>{}(o.*member) >> 1)
                                   : static_cast<int64_t>(choice_index(f, o.*member));
        else
          return static_cast<int64_t>(o.*member);
      },
      f.member);
}

// agreed_value's number shown as the option's value, for the ranks' error.
template <typename Owner>
std::string show_agreed(const OptionField<Owner>& f, int64_t v) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_cvref_t<decltype(std::declval<Owner&>().*member)>;
        const auto in_choices = [&](size_t i) { return i < f.choices.size() ? std::string(f.choices[i]) : "another"; };
        if constexpr (std::is_same_v<T, double>)
          return fmt::format("{}", std::bit_cast<double>(v));
        else if constexpr (std::is_same_v<T, std::string>)
          return f.choices.empty() ? fmt::format("a text of digest {:x}", v) : in_choices(static_cast<size_t>(v));
        else if constexpr (std::is_same_v<T, MicroBatchSum>)
          return std::string(v >= 0 && v < 4 ? kMicroBatchSumNames[static_cast<size_t>(v)] : "another");
        else
          return fmt::format("{}", static_cast<T>(v));
      },
      f.member);
}

}  // namespace loom::models
