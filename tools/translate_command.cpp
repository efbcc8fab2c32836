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
  bool profile = false;  // each kernel's time over the whole decoding, on stderr
};

void run_translate(const TranslateOptions& o) {
  LOOM_CHECK(o.nbest <= o.beam, "translate: --nbest {} asks for more hypotheses than --beam {} keeps", o.nbest, o.beam);
  use_threads(o.threads);
  use_precision(o.precision, o.device);
  const Device device = parse_device(o.device);
  std::vector<ModelFolder> folders;
  std::vector<models::Transformer*> ensemble;
  for (const std::string& dir : o.models) {
    folders.push_back(load_model_folder(dir, "translate"));
    check_same_vocabulary(folders.front(), folders.back(), "translate");
    ensemble.push_back(folders.back().model.get());
    ensemble.back()->to(device);
  }
  models::Vocabulary& vocab = *folders.front().vocab;
  const int64_t max_len = models::shortest_max_len(ensemble);

  std::vector<std::string> lines;
  if (o.input.empty()) {
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
  } else {
    lines = models::read_lines(o.input);
  }
  const std::string input_name = o.input.empty() ? "stdin" : "'" + o.input + "'";
  // Translations go to a temporary renamed over --output at the end: an error or
  // a kill midway leaves no file that looks complete.
  std::optional<AtomicFile> file_out;
  if (!o.output.empty()) file_out.emplace(o.output);
  std::ostream& out = file_out ? file_out->stream() : std::cout;
  // The source and its eos must fit the positional table; longer lines are cut
  // (with a warning naming the line) rather than stopping the whole job.
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
  // Batches of lines of the same length (the order restored on output): no
  // padding, the same output cap for every line of a batch (its own length +
  // --extra-len), so a line's translation never depends on which lines share its
  // batch; and a batch's sentences finish at about the same step.
  // A blank line stays blank (as Marian and fairseq do): it is not decoded.
  std::vector<size_t> order;
  std::vector<std::string> translations(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!models::is_blank(lines[i]))
      order.push_back(i);
    else if (o.nbest == 0)
      translations[i] = "\n";
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::pair<size_t, size_t>> batches;  // [first, last) of order
  for (size_t first = 0, last = 0; first < order.size(); first = last) {
    last = first;
    while (last < order.size() && last - first < static_cast<size_t>(o.batch) &&
           ids[order[last]].size() == ids[order[first]].size())
      ++last;
    batches.emplace_back(first, last);
  }
  std::vector<std::vector<std::vector<models::Hypothesis>>> hyps(batches.size());
  auto decode_batch = [&](size_t b) {
    const auto [first, last] = batches[b];
    const size_t length = ids[order[first]].size();
    std::vector<int64_t> flat;
    for (size_t k = first; k < last; ++k) flat.insert(flat.end(), ids[order[k]].begin(), ids[order[k]].end());
    Tensor src =
        from_vector(flat, {static_cast<int64_t>(last - first), static_cast<int64_t>(length)}, {DType::i64, device});
    // The target prefix (bos + output) must fit the positional table too.
    const models::BeamOptions search{
        .beam = o.beam,
        .length_penalty = o.alpha,
        .max_len = std::min<int64_t>(static_cast<int64_t>(length) + o.extra_len, max_len - 1),
        .nbest = std::max<int64_t>(o.nbest, 1),
        .horizon = o.horizon};
    if (o.nbest > 0) {
      hyps[b] = models::beam_search(ensemble, src, models::Vocabulary::kBos, models::Vocabulary::kEos, search);
      return;
    }
    // Only the text: beam 1 at alpha 0 decodes greedily (models::best_tokens).
    for (auto& tokens : models::best_tokens(ensemble, src, models::Vocabulary::kBos, models::Vocabulary::kEos, search))
      hyps[b].push_back({models::Hypothesis{.tokens = std::move(tokens)}});
  };
  std::optional<KernelProfile> profile;
  if (o.profile) profile.emplace(device);
  const auto decode_start = std::chrono::steady_clock::now();
  // On the CPU each thread decodes whole batches (decode_batches), --profile too: its
  // kernels then run single-threaded as they do unprofiled, each timed on its own
  // thread, and their times add up to the workers' time (workers x the wall time).
  const int workers = models::decode_batches(ensemble, batches.size(), o.threads, decode_batch);
  for (size_t b = 0; b < batches.size(); ++b)
    for (size_t i = 0; i < hyps[b].size(); ++i) {
      const std::vector<models::Hypothesis>& best = hyps[b][i];
      const size_t line = order[batches[b].first + i];
      if (o.nbest == 0) {
        translations[line] = vocab.decode(best[0].tokens) + '\n';
        continue;
      }
      for (size_t rank = 0; rank < best.size(); ++rank)  // see README: line, rank, score, log p, text
        translations[line] += fmt::format("{}\t{}\t{:.4f}\t{:.4f}\t{}\n", line + 1, rank + 1, best[rank].score,
                                          best[rank].log_prob, vocab.decode(best[rank].tokens));
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
  add_precision_option(*cmd, o->precision);
  add_device_option(*cmd, o->device);
  cmd->add_flag("--profile", o->profile, "print each kernel's time over the decoding (stderr)");
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
