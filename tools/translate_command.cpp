// `loom translate`: sentences in (stdin or --input, plain or gzip), translations
// out, with beam search; `loom bleu`: corpus BLEU of a file against references,
// as sacreBLEU prints it.

#include <chrono>
#include <iostream>
#include <optional>

#include "commands.h"
#include "model_folder.h"
#include "loom/atomic_file.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "options.h"

namespace loom::tools {

namespace {

struct TranslateOptions {
  std::vector<std::string> models{"runs/multi30k-de-en"};  // more than one: an ensemble
  std::string input, output;
  int64_t beam = 4, batch = 32, extra_len = 50;
  int64_t horizon = models::BeamOptions{}.horizon;
  int64_t nbest = 0;  // 0: one translation per line; N: the N best hypotheses with their scores
  double alpha = 0.6;
  int threads = 2;
  std::string device = "cpu", precision = "float32";
  bool profile = false;         // each kernel's time over the whole decoding, on stderr
  bool skip_checksums = false;  // load without verifying each tensor's CRC-32 (for speed)
};

// The models of --model (more than one: an ensemble, checked to share one vocabulary), on `device`.
std::vector<ModelFolder> load_ensemble(const TranslateOptions& o, Device device) {
  std::vector<ModelFolder> folders;
  for (const std::string& dir : o.models) {
    folders.push_back(
        load_model_folder(dir, "translate", o.skip_checksums ? nn::Checksums::skip : nn::Checksums::verify));
    check_same_vocabulary(folders.front(), folders.back(), "translate");
    folders.back().model->to(device);
  }
  return folders;
}

// Each line's pieces and eos. The source and its eos must fit the positional table;
// longer lines are cut (with a warning naming the line) rather than stopping the job.
std::vector<std::vector<int64_t>> encode_lines(models::Vocabulary& vocab, const std::vector<std::string>& lines,
                                               int64_t max_len, const std::string& input_name) {
  const size_t max_pieces = static_cast<size_t>(max_len - 1);
  std::vector<std::vector<int64_t>> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids.push_back(vocab.encode(lines[i]));
    if (ids.back().size() > max_pieces) {
      fmt::print(stderr,
                 "loom: warning: translate: line {} of {} has {} pieces, more than the model's {}; "
                 "translating its first {}\n",
                 i + 1, input_name, ids.back().size(), max_pieces, max_pieces);
      ids.back().resize(max_pieces);
    }
    ids.back().push_back(models::Vocabulary::kEos);
  }
  return ids;
}

// Batches of lines of the same length (the order restored on output): no padding,
// the same output cap for every line of a batch (its own length + --extra-len), so
// a line's translation never depends on which lines share its batch; and a batch's
// sentences finish at about the same step. A blank line (as Marian and fairseq do)
// is in no batch.
struct BatchPlan {
  std::vector<size_t> order;                       // the decoded lines, by length
  std::vector<std::pair<size_t, size_t>> batches;  // [first, last) of order
};
BatchPlan plan_batches(const std::vector<std::string>& lines, const std::vector<std::vector<int64_t>>& ids,
                       int64_t batch_size) {
  BatchPlan plan;
  for (size_t i = 0; i < lines.size(); ++i)
    if (!models::is_blank(lines[i])) plan.order.push_back(i);
  std::stable_sort(plan.order.begin(), plan.order.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  for (size_t first = 0, last = 0; first < plan.order.size(); first = last) {
    last = first;
    while (last < plan.order.size() && last - first < static_cast<size_t>(batch_size) &&
           ids[plan.order[last]].size() == ids[plan.order[first]].size())
      ++last;
    plan.batches.emplace_back(first, last);
  }
  return plan;
}

// One batch's hypotheses: the --nbest best of each sentence, or (no --nbest) its
// best tokens alone (beam 1 at alpha 0 decodes greedily: models::best_tokens).
std::vector<std::vector<models::Hypothesis>> decode_batch(const TranslateOptions& o,
                                                          const std::vector<models::Transformer*>& ensemble,
                                                          const Tensor& src, int64_t max_len) {
  // The target prefix (bos + output) must fit the positional table too.
  const models::BeamOptions search{.beam = o.beam,
                                   .length_penalty = o.alpha,
                                   .max_len = std::min<int64_t>(src.shape()[1] + o.extra_len, max_len - 1),
                                   .nbest = std::max<int64_t>(o.nbest, 1),
                                   .horizon = o.horizon};
  if (o.nbest > 0)
    return models::beam_search(ensemble, src, models::Vocabulary::kBos, models::Vocabulary::kEos, search);
  std::vector<std::vector<models::Hypothesis>> hyps;
  for (auto& tokens : models::best_tokens(ensemble, src, models::Vocabulary::kBos, models::Vocabulary::kEos, search))
    hyps.push_back({models::Hypothesis{.tokens = std::move(tokens)}});
  return hyps;
}

// A line's output: its translation, or (--nbest) one row per hypothesis (see docs/decoding.md:
// line, rank, score, log p, text).
std::string format_line(models::Vocabulary& vocab, const std::vector<models::Hypothesis>& best, size_t line,
                        int64_t nbest) {
  if (nbest == 0) return vocab.decode(best[0].tokens) + '\n';
  std::string text;
  for (size_t rank = 0; rank < best.size(); ++rank)
    text += fmt::format("{}\t{}\t{:.4f}\t{:.4f}\t{}\n", line + 1, rank + 1, best[rank].score, best[rank].log_prob,
                        vocab.decode(best[rank].tokens));
  return text;
}

void run_translate(const TranslateOptions& o) {
  LOOM_CHECK(o.nbest <= o.beam, "translate: --nbest {} asks for more hypotheses than --beam {} keeps", o.nbest, o.beam);
  use_threads(o.threads);
  use_precision(o.precision, o.device);
  const Device device = parse_device(o.device);
  std::vector<ModelFolder> folders = load_ensemble(o, device);
  std::vector<models::Transformer*> ensemble;
  for (ModelFolder& folder : folders) ensemble.push_back(folder.model.get());
  models::Vocabulary& vocab = *folders.front().vocab;
  const int64_t max_len = models::shortest_max_len(ensemble);

  std::vector<std::string> lines;
  if (o.input.empty()) {
    for (std::string line; std::getline(std::cin, line);) {
      models::check_utf8(line, "stdin", static_cast<int64_t>(lines.size()) + 1);
      lines.push_back(line);
    }
  } else {
    lines = models::read_lines(o.input);
  }
  // Translations go to a temporary renamed over --output at the end: an error or
  // a kill midway leaves no file that looks complete.
  std::optional<AtomicFile> file_out;
  if (!o.output.empty()) file_out.emplace(o.output);
  std::ostream& out = file_out ? file_out->stream() : std::cout;
  const std::vector<std::vector<int64_t>> ids =
      encode_lines(vocab, lines, max_len, o.input.empty() ? "stdin" : "'" + o.input + "'");
  const BatchPlan plan = plan_batches(lines, ids, o.batch);
  std::vector<std::vector<std::vector<models::Hypothesis>>> hyps(plan.batches.size());
  auto decode = [&](size_t b) {
    const auto [first, last] = plan.batches[b];
    const size_t length = ids[plan.order[first]].size();
    std::vector<int64_t> flat;
    for (size_t k = first; k < last; ++k) flat.insert(flat.end(), ids[plan.order[k]].begin(), ids[plan.order[k]].end());
    const Tensor src =
        from_vector(flat, {static_cast<int64_t>(last - first), static_cast<int64_t>(length)}, {DType::i64, device});
    hyps[b] = decode_batch(o, ensemble, src, max_len);
  };
  std::optional<KernelProfile> profile;
  if (o.profile) profile.emplace(device);
  const auto decode_start = std::chrono::steady_clock::now();
  // On the CPU each thread decodes whole batches (decode_batches), --profile too: its
  // kernels then run single-threaded as they do unprofiled, each timed on its own
  // thread, and their times add up to the workers' time (workers x the wall time).
  const int workers = models::decode_batches(ensemble, plan.batches.size(), o.threads, decode);
  std::vector<std::string> translations(lines.size(), o.nbest == 0 ? "\n" : "");  // blank lines stay blank
  for (size_t b = 0; b < plan.batches.size(); ++b)
    for (size_t i = 0; i < hyps[b].size(); ++i) {
      const size_t line = plan.order[plan.batches[b].first + i];
      translations[line] = format_line(vocab, hyps[b][i], line, o.nbest);
    }
  if (profile) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
    fmt::print(stderr,
               "decoding: {:.2f} s on {} thread(s) decoding batches at once; shares are of {:.2f} s ({} x {:.2f} s)\n",
               seconds, workers, workers * seconds, workers, seconds);
    print_kernel_profile(*profile, 1, workers * seconds, "decoding", device, stderr);
  }
  for (const std::string& t : translations) out << t;
  out.flush();
  if (file_out) file_out->commit();
}

}  // namespace

void add_translate_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("translate", "translate sentences with a model from `loom train` (beam search)");
  auto o = std::make_shared<TranslateOptions>();
  cmd->add_option("--model", o->models,
                  "folder with model.safetensors and its vocabulary; given more than once, an ensemble (the mean of "
                  "the models' log-probabilities; one vocabulary)")
      ->capture_default_str();
  cmd->add_option("--input", o->input, "sentences, one per line, plain or .gz (default: stdin)");
  cmd->add_option("--output", o->output, "where to write translations (default: stdout)");
  cmd->add_option("--beam", o->beam, "beam size")->capture_default_str()->check(in_range(1, 1000));
  cmd->add_option("--alpha", o->alpha, "length penalty exponent")->capture_default_str()->check(in_range(0, 10));
  cmd->add_option("--nbest", o->nbest,
                  "print the N best finished hypotheses per line as LINE<TAB>RANK<TAB>SCORE<TAB>LOGPROB<TAB>TEXT "
                  "(SCORE = LOGPROB / ((5 + length) / 6)^alpha, what the beam maximizes)")
      ->check(in_range(1, 1000));
  cmd->add_option("--horizon", o->horizon,
                  "stop a sentence once beam hypotheses have finished and no live one could beat the best even if it "
                  "ended within this many tokens (0: by max_len, the exact bound; slower)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--batch", o->batch, "sentences decoded together")->capture_default_str()->check(in_range(1, 10000));
  cmd->add_option("--extra-len", o->extra_len, "longest output: input length + this (at most the model's max_len)")
      ->capture_default_str()
      ->check(in_range(0, models::TransformerConfig::kMaxLen));
  add_threads_option(*cmd, o->threads);
  add_precision_option(*cmd, o->precision, /*training=*/false);
  add_device_option(*cmd, o->device);
  cmd->add_flag("--profile", o->profile, "print each kernel's time over the decoding (stderr)");
  cmd->add_flag("--skip-checksums", o->skip_checksums,
                "load the model without verifying each tensor's checksum (faster; a damaged file goes unnoticed)");
  cmd->callback([o] { run_translate(*o); });

  auto* bleu =
      app.add_subcommand("bleu", "corpus BLEU of a hypothesis file against reference files (sacreBLEU's default)");
  auto hyp = std::make_shared<std::string>();
  auto refs = std::make_shared<std::vector<std::string>>();
  bleu->add_option("hypotheses", *hyp, "translations, one per line")->required();
  bleu->add_option("references", *refs, "one or more reference files (plain or .gz)")->required();
  bleu->callback([hyp, refs] {
    std::vector<std::vector<std::string>> ref_sets;
    for (const auto& r : *refs) ref_sets.push_back(models::read_lines(r));
    models::BleuScore s = models::corpus_bleu(models::read_lines(*hyp), ref_sets);
    fmt::print("{}\n", s.str());
  });
}

}  // namespace loom::tools
