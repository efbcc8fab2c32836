// models::Trainer: exact resume (a run stopped and resumed makes the same
// updates, bit for bit, at 1 and 2 threads), gradient accumulation equal to one
// big batch, checkpoints (kept, best, averaged), and the divergence guard that
// never overwrites a good checkpoint.
#include <doctest/doctest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "helpers.h"
#include "loom/byte_hash.h"
#include "loom/models.h"
#include "loom/nn.h"
#include "loom/ops.h"
#include "loom/standin.h"

using namespace loom;
using namespace loom::models;
using loom::testing::error_of;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 24;

// A copy task: target = source, lengths 2 to 9, ids 4..kVocab-1 (0-3 are special).
std::vector<EncodedPair> copy_pairs(int64_t count, uint64_t seed) {
  Generator gen(seed);
  auto u = rand({count * 10}, {DType::f64}, gen).to_vector<double>();
  std::vector<EncodedPair> pairs;
  size_t k = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t len = 2 + static_cast<int64_t>(u[k++] * 8);
    EncodedPair p;
    for (int64_t j = 0; j < len; ++j) p.src.push_back(4 + static_cast<int64_t>(u[k++] * (kVocab - 4)) % (kVocab - 4));
    p.tgt = p.src;
    pairs.push_back(p);
    k = static_cast<size_t>((i + 1) * 10);
  }
  return pairs;
}

TransformerConfig tiny_config() {
  TransformerConfig c = presets::tiny(kVocab);
  c.max_len = 16;
  return c;
}

TrainerOptions small_run() {
  TrainerOptions o;
  o.max_tokens = 64;
  o.max_len = 12;
  o.warmup = 10;
  o.seed = 3;
  o.epochs = 100;
  o.log_every = 3;
  return o;
}

// A fresh, empty run folder under the system's temporary folder.
std::string run_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("loom_test_trainer_{}_{}", ::getpid(), name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Record {
  std::vector<double> losses, windows;  // every step's loss; the window means on log steps
  std::vector<int64_t> steps;
  int64_t last_epoch = 0;
};

TrainerHooks recording(Record& r) {
  TrainerHooks h;
  h.step_done = [&r](const StepReport& s) {
    r.steps.push_back(s.step);
    r.losses.push_back(s.loss);
    r.last_epoch = s.epoch;
    if (s.log) r.windows.push_back(s.window_loss);
  };
  return h;
}

// The kept step-<N>.safetensors files of a run folder, by name.
std::set<std::string> kept_files(const std::string& dir) {
  std::set<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("step-")) kept.insert(entry.path().filename().string());
  return kept;
}

std::vector<std::vector<float>> parameters_of(Trainer& t) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : t.model().parameters()) out.push_back(p.detach().contiguous().to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("a run stopped mid-epoch and resumed makes the same updates, bit for bit, at 1 and 2 threads") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.accum = 2;       // the position in the data counts batches, not updates
  o.max_steps = 16;  // 14 batches an epoch, so 2 and a bit
  o.save_every = 5;
  o.keep_last = 2;
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<float>> final_params[2];
  Record straight_runs[2];
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    Record straight;
    Trainer a(tiny_config(), o, train, val, run_folder(fmt::format("straight{}", threads)));
    CHECK(a.run(recording(straight)));
    REQUIRE(straight.losses.size() == 16);
    CHECK(straight.last_epoch == 3);  // 7 updates an epoch: stopped in the 2nd, resumed across its end

    // Stopped by the stop flag (what SIGINT sets) after step 9, mid-epoch, then resumed from the folder.
    const std::string dir = run_folder(fmt::format("stopped{}", threads));
    Record resumed;
    {
      Trainer b(tiny_config(), o, train, val, dir);
      std::atomic<bool> stop{false};
      TrainerHooks hooks = recording(resumed);
      auto record = hooks.step_done;
      hooks.step_done = [&](const StepReport& s) {
        record(s);
        if (s.step == 9) stop = true;
      };
      hooks.stop = &stop;
      CHECK_FALSE(b.run(hooks));
      CHECK(b.step() == 9);
    }
    auto c = Trainer::resume(dir, train, val);
    CHECK(c->step() == 9);
    CHECK(c->run(recording(resumed)));
    CHECK(resumed.steps.size() == 16);
    CHECK(resumed.losses == straight.losses);    // bitwise: vector<double> ==
    CHECK(resumed.windows == straight.windows);  // the printed means too (a window spans the stop)
    CHECK(parameters_of(*c) == parameters_of(a));

    // Stopped by --max-steps instead, resumed with a larger one.
    const std::string dir2 = run_folder(fmt::format("max_steps{}", threads));
    Record twice;
    TrainerOptions first = o;
    first.max_steps = 5;
    Trainer d(tiny_config(), first, train, val, dir2);
    CHECK(d.run(recording(twice)));
    auto e = Trainer::resume(dir2, train, val, [](TrainerOptions& saved) { saved.max_steps = 16; });
    CHECK(e->run(recording(twice)));
    CHECK(twice.losses == straight.losses);
    CHECK(parameters_of(*e) == parameters_of(a));
    final_params[threads - 1] = parameters_of(a);
    straight_runs[threads - 1] = straight;
  }
  omp_set_num_threads(saved_threads);
  CHECK(straight_runs[0].losses == straight_runs[1].losses);  // and the thread count changes nothing
  CHECK(final_params[0] == final_params[1]);
}

TEST_CASE("--regroup-batches: each epoch's batches grouped anew, the same bits across a resume") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.max_steps = 30;  // 14 batches an epoch: into the 3rd
  o.regroup_batches = true;
  Record fixed, straight, resumed;
  TrainerOptions same_batches = o;
  same_batches.regroup_batches = false;
  CHECK(Trainer(tiny_config(), same_batches, train, val, run_folder("fixed_groups")).run(recording(fixed)));
  Trainer a(tiny_config(), o, train, val, run_folder("regrouped"));
  CHECK(a.run(recording(straight)));
  CHECK(straight.losses.size() == fixed.losses.size());
  CHECK(straight.losses != fixed.losses);  // other batches from the first epoch on

  const std::string dir = run_folder("regrouped_stopped");
  {
    TrainerOptions first = o;
    first.max_steps = 17;  // stopped in the 2nd epoch, whose groups the resume must draw again
    CHECK(Trainer(tiny_config(), first, train, val, dir).run(recording(resumed)));
  }
  auto b = Trainer::resume(dir, train, val, [](TrainerOptions& saved) { saved.max_steps = 30; });
  CHECK(b->options().regroup_batches);  // kept in the training state
  CHECK(b->run(recording(resumed)));
  CHECK(resumed.losses == straight.losses);
  CHECK(parameters_of(*b) == parameters_of(a));
}

TEST_CASE("--cooldown-epochs: Noam's rate until the last epochs, then down linearly to 1/N of it, across a resume") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.epochs = 3;
  o.cooldown_epochs = 1;
  std::vector<double> lrs;
  TrainerHooks hooks;
  hooks.step_done = [&](const StepReport& r) { lrs.push_back(r.lr); };
  Trainer a(tiny_config(), o, train, val, run_folder("cooldown"));
  CHECK(a.run(hooks));
  REQUIRE(lrs.size() % 3 == 0);
  const size_t per_epoch = lrs.size() / 3, start = 2 * per_epoch;
  Tensor w = zeros({1});
  w.requires_grad_();
  optim::Adam adam({w}, {});
  optim::Noam noam(adam, tiny_config().d_model, o.warmup);
  for (size_t s = 0; s < lrs.size(); ++s) {
    CAPTURE(s);
    const double plain = noam.rate(static_cast<int64_t>(s) + 1);
    const double left = s < start ? 1.0 : static_cast<double>(lrs.size() - s) / static_cast<double>(per_epoch);
    CHECK(lrs[s] == doctest::Approx(plain * left).epsilon(1e-12));
  }
  // Stopped inside the cool-down and resumed: the same rates.
  const std::string dir = run_folder("cooldown_resumed");
  std::vector<double> again;
  {
    TrainerOptions first = o;
    first.max_steps = static_cast<int64_t>(start) + 2;
    Trainer b(tiny_config(), first, train, val, dir);
    TrainerHooks h;
    h.step_done = [&](const StepReport& r) { again.push_back(r.lr); };
    CHECK(b.run(h));
  }
  auto c = Trainer::resume(dir, train, val, [](TrainerOptions& saved) { saved.max_steps = 0; });
  TrainerHooks h;
  h.step_done = [&](const StepReport& r) { again.push_back(r.lr); };
  CHECK(c->run(h));
  CHECK(again == lrs);
  TrainerOptions bad = o;
  bad.cooldown_epochs = 4;
  CHECK(error_of([&] { bad.validate(); }) == "train: --cooldown-epochs must be in [0, --epochs 3], got 4");
}

TEST_CASE("TrainerOptions: one row per option, saved and read back by key, each range checked by its flag") {
  const auto& fields = TrainerOptions::fields();
  std::set<std::string> flags, keys;
  for (const auto& f : fields) {
    CHECK(flags.insert(f.flag).second);
    CHECK(keys.insert(f.key).second);
    CHECK(std::string(f.flag).starts_with("--"));
    CHECK(std::string(f.help).size() > 5);
  }
  // Every option but where the run happens (device, comm) has a row: 25 of them.
  CHECK(fields.size() == 25);
  // Saved and read back: every field, whatever its type.
  TrainerOptions o = small_run();
  o.reduce = MicroBatchSum::fast;
  o.regroup_batches = true;
  o.lr_factor = 0.7;
  o.seed = 18446744073709551615ull;
  o.bucket_mb = 0.25;
  o.overlap = false;
  const TrainerOptions back = TrainerOptions::from_json(o.to_json());
  for (const auto& f : fields) CHECK_MESSAGE(text_of(back, f) == text_of(o, f), f.flag);
  CHECK(back.to_json() == o.to_json());
  // A state saved before an option existed reads its default.
  const TrainerOptions old = TrainerOptions::from_json(R"({"max_tokens": 77, "seed": 4})");
  CHECK(old.max_tokens == 77);
  CHECK(old.seed == 4);
  CHECK(old.reduce == MicroBatchSum::automatic);
  CHECK(old.bucket_mb == 25);
  CHECK(error_of([] { TrainerOptions::from_json(R"({"reduce": "fastest"})"); }) ==
        "the saved options: --reduce 'fastest' is not a value of that option");
  // The rows' ranges, in the Trainer's own check.
  auto refused = [](auto change) {
    TrainerOptions bad = small_run();
    change(bad);
    return error_of([&] { bad.validate(); });
  };
  CHECK(refused([](TrainerOptions& b) { b.max_len = 0; }) ==
        "train: --max-len must be at least 1 and at most 1048575, got 0");
  CHECK(refused([](TrainerOptions& b) { b.lr_factor = 0; }) ==
        "train: --lr-factor must be above 0 and at most 1000000, got 0");
  CHECK(refused([](TrainerOptions& b) { b.label_smoothing = 1; }) ==
        "train: --label-smoothing must be at least 0 and below 1, got 1");
  CHECK(refused([](TrainerOptions& b) { b.clip = std::nan(""); }) ==
        "train: --clip must be at least 0 and at most 1000000, got nan");
  CHECK(refused([](TrainerOptions& b) { b.bucket_mb = 0; }) ==
        "train: --bucket-mb must be at least 1e-06 and at most 1000000, got 0");
  CHECK(refused([](TrainerOptions& b) { b.max_tokens = 12; }) ==
        "train: --max-tokens 12 must exceed --max-len 12 (a batch holds a sentence)");
  CHECK(refused([](TrainerOptions& b) { b.pad_to = 0; }) ==
        "train: --pad-to must be at least 1 and at most 1024, got 0");
  CHECK(refused([](TrainerOptions&) {}) == "(no error)");
}

// --cuda-graphs on the stand-in device (loom/capture.h: it records a capture's calls and
// replays them): each batch shape's micro-batches captured once and replayed make the
// eager run's updates bit for bit, accumulation and clipping included, with the same
// --pad-to (its padding changes the work, not the loss: within float32 rounding).
TEST_CASE("--cuda-graphs: captured and replayed steps train as eager ones, bit for bit (stand-in device)") {
  enable_standin_device();
  const auto train = copy_pairs(48, 1), val = copy_pairs(8, 2);
  TrainerOptions o = small_run();
  o.device = Device::standin(0);
  o.pad_to = 8;
  o.accum = 2;
  o.clip = 1.0;
  o.max_steps = 6;
  auto run = [&](bool graphs, int64_t pad_to, double dropout, const std::string& name) {
    TrainerOptions options = o;
    options.cuda_graphs = graphs;
    options.pad_to = pad_to;
    TransformerConfig config = tiny_config();
    config.dropout = dropout;
    Trainer t(config, options, train, val, run_folder(name));
    Record r;
    std::vector<std::string> messages;
    TrainerHooks hooks = recording(r);
    hooks.message = [&](const std::string& m) { messages.push_back(m); };
    CHECK(t.run(hooks));
    for (const std::string& m : messages) CHECK_MESSAGE(m.find("--cuda-graphs") == std::string::npos, m);
    if (graphs) {  // 12 micro-batches in a few shapes: each captured once, then replayed
      CHECK(t.captured_shapes() >= 1);
      CHECK(t.captured_shapes() < 12);
    } else {
      CHECK(t.captured_shapes() == 0);
    }
    std::vector<std::vector<float>> params;
    for (const Tensor& p : t.model().parameters()) params.push_back(p.detach().to(kCPU).to_vector<float>());
    return std::pair{r.losses, params};
  };
  const double dropout = tiny_config().dropout;
  REQUIRE(dropout > 0);
  const auto eager = run(false, 8, dropout, "graphs_eager"), replayed = run(true, 8, dropout, "graphs_replayed");
  REQUIRE(eager.first.size() == 6);
  CHECK(eager.first == replayed.first);
  CHECK(eager.second == replayed.second);
  // Padding changes the work (and so dropout's masks, drawn by element), not the loss.
  const auto unpadded = run(false, 1, 0.0, "graphs_unpadded"), padded = run(false, 8, 0.0, "graphs_padded");
  for (size_t i = 0; i < unpadded.first.size(); ++i)
    CHECK(std::abs(unpadded.first[i] - padded.first[i]) <= 1e-5 * std::abs(unpadded.first[i]));
  // Where it cannot run, said at once.
  TrainerOptions on_cpu = o;
  on_cpu.device = kCPU;
  on_cpu.cuda_graphs = true;
  CHECK(error_of([&] {
          Trainer(tiny_config(), on_cpu, train, val, run_folder("graphs_cpu"));
        }).find("--cuda-graphs needs a GPU") != std::string::npos);
}

TEST_CASE("the corpus fingerprint keeps its constants: saved training states compare against it") {
  // FNV-1a's steps from loom's own offset basis over the lengths and ids as 8 bytes each.
  CHECK(fingerprint({EncodedPair{{5, 7}, {9}}}) == 0xa50beaacf67a282bull);
  ByteHash h;
  h.add("loom");
  CHECK(h.value() == 0x8fd1be2686ba89a2ull);
}

TEST_CASE("resume refuses another corpus and a folder without a state, naming them") {
  const auto train = copy_pairs(60, 7), val = copy_pairs(8, 8);
  TrainerOptions o = small_run();
  o.max_steps = 3;
  const std::string dir = run_folder("refuse");
  Trainer(tiny_config(), o, train, val, dir).run();
  auto other = train;
  other[5].tgt.push_back(5);
  CHECK(error_of([&] { Trainer::resume(dir, other, val); }) ==
        fmt::format("train: --resume '{}': the training data differs from the run's (60 pairs now, 60 then, same count "
                    "but other sentences); a resumed run needs the same corpus, vocabulary and --max-len",
                    dir));
  const std::string empty = run_folder("no_state");
  CHECK(error_of([&] { Trainer::resume(empty, train, val); }).find("no training state") != std::string::npos);
  // The state is not a model: loading it as one names a tensor the model lacks.
  Transformer model(tiny_config());
  CHECK(error_of([&] { nn::load(model, Trainer::state_path(dir)); }).find("is not a parameter of the model") !=
        std::string::npos);
}

TEST_CASE("N accumulated batches give the gradient of one batch holding them all (float32 rounding aside)") {
  // No dropout: the masks of one big batch and of its parts are different draws.
  TransformerConfig config = tiny_config();
  config.dropout = config.attention_dropout = config.relu_dropout = 0;
  const auto pairs = copy_pairs(24, 11);
  TrainerOptions o = small_run();
  o.max_tokens = 100000;  // every make_batches call below gives one batch
  Trainer t(config, o, pairs, copy_pairs(4, 12), run_folder("accum"));
  Generator unused(0);
  const Batch big = make_batches(pairs, o.max_tokens, o.max_len, unused).at(0);
  REQUIRE(big.src.shape()[0] == 24);
  std::vector<Batch> parts;  // 3 micro-batches of different sizes and target token counts
  for (auto [first, last] : {std::pair{0, 5}, {5, 14}, {14, 24}}) {
    std::vector<EncodedPair> slice(pairs.begin() + first, pairs.begin() + last);
    parts.push_back(make_batches(slice, o.max_tokens, o.max_len, unused).at(0));
  }
  CHECK(parts[0].tgt_tokens != parts[2].tgt_tokens);  // unequal shares: a plain mean would be wrong

  t.model().zero_grad();
  const double big_loss = t.accumulate_gradients({big}, 1);
  std::vector<Tensor> big_grads;
  for (const Tensor& p : t.model().parameters()) big_grads.push_back(p.grad().clone());
  t.model().zero_grad();
  const double accumulated_loss = t.accumulate_gradients(parts, 1);

  CHECK(accumulated_loss == doctest::Approx(big_loss).epsilon(1e-6));
  // Not bitwise: the big batch sums each weight's gradient over all 24 sentences
  // inside one product (and pads to another length), the parts sum 3 partial
  // products and add them; float32 addition is not associative. The difference
  // is rounding: a few float32 ulps of the largest entry, far below 1e-5 of it.
  // Some gradients are zero in exact arithmetic (a key bias: softmax ignores a
  // constant added to a row's scores), so theirs is only the rounding left by
  // cancelling terms as large as the others: hence a floor from the largest of all.
  const auto params = t.model().named_parameters();
  double largest_of_all = 0;
  for (const Tensor& g : big_grads)
    for (float v : g.to_vector<float>()) largest_of_all = std::max(largest_of_all, std::abs(double(v)));
  for (size_t k = 0; k < params.size(); ++k) {
    CAPTURE(params[k].first);
    const auto a = big_grads[k].to_vector<float>(), b = params[k].second.grad().to_vector<float>();
    double largest = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      largest = std::max(largest, std::abs(double(a[i])));
      worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    }
    CHECK(worst <= 1e-5 * largest + 1e-6 * largest_of_all);
  }
  // Equal weights would be a different (wrong) gradient: the test can tell.
  t.model().zero_grad();
  for (const Batch& b : parts) t.accumulate_gradients({b}, 1);
  double unweighted_gap = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const auto a = big_grads[k].to_vector<float>(), b = params[k].second.grad().to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) unweighted_gap = std::max(unweighted_gap, std::abs(double(3 * a[i]) - b[i]));
  }
  CHECK(unweighted_gap > 1e-3);
}

TEST_CASE("checkpoints: every N steps, the last K kept, the best by validation loss, the last K averaged") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.max_steps = 23;
  o.save_every = 4;
  o.keep_last = 3;
  o.average_last = 2;
  const std::string dir = run_folder("checkpoints");
  Trainer t(tiny_config(), o, train, val, dir, {{"vocabulary", "spm.model"}});
  std::ofstream(dir + "/spm.model") << "not really a vocabulary";
  std::vector<Evaluation> evaluations;
  TrainerHooks hooks;
  hooks.evaluated = [&](const Evaluation& e) { evaluations.push_back(e); };
  std::vector<std::string> messages;
  hooks.message = [&](const std::string& m) { messages.push_back(m); };
  CHECK(t.run(hooks));
  std::vector<int64_t> saved_steps;
  double best = 1e300;
  for (const auto& e : evaluations) {
    saved_steps.push_back(e.step);
    CHECK(e.best == (e.val_loss < best));
    best = std::min(best, e.val_loss);
  }
  REQUIRE(saved_steps.size() >= 6);  // 4, 8, ..., 20, the epoch ends, and the last step
  CHECK(saved_steps.back() == 23);
  const std::set<std::string> kept = kept_files(dir);
  const size_t n = saved_steps.size();
  CHECK(kept == std::set<std::string>{fmt::format("step-{:08d}.safetensors", saved_steps[n - 3]),
                                      fmt::format("step-{:08d}.safetensors", saved_steps[n - 2]),
                                      "step-00000023.safetensors"});
  const auto best_meta = nn::load_safetensors(dir + "/best/model.safetensors").metadata;
  CHECK(best_meta.at("val_loss") == fmt::format("{:.6f}", best));
  CHECK(bytes_of(dir + "/best/spm.model") == "not really a vocabulary");
  const auto average = nn::load_safetensors(dir + "/average/model.safetensors");
  CHECK(average.metadata.at("averaged_from") ==
        fmt::format("[\"{}/step-{:08d}.safetensors\",\"{}/step-00000023.safetensors\"]", dir, saved_steps[n - 2], dir));
  CHECK(bytes_of(dir + "/average/spm.model") == "not really a vocabulary");
  CHECK(messages.back().starts_with("averaged the last 2 checkpoints"));
  // The latest model and the state agree on the step.
  CHECK(nn::load_safetensors(dir + "/model.safetensors").metadata.at("step") == "23");
  CHECK(Trainer::read_state(dir).step == 23);
  // A new run into that folder would mix its checkpoints with these: refused.
  CHECK(error_of([&] {
          Trainer(tiny_config(), o, train, val, dir);
        }).find("already holds 3 checkpoint(s) of another run") != std::string::npos);
}

TEST_CASE("--keep-every: weights-only snapshots kept among the last K, the same models as full checkpoints") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  // A file's tensors by name, as float vectors (the metadata differs: a snapshot has no validation loss).
  auto tensors_of = [](const std::string& path) {
    std::map<std::string, std::vector<float>> out;
    for (const auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.contiguous().to_vector<float>();
    return out;
  };
  TrainerOptions o = small_run();
  o.max_steps = 20;  // 14 updates an epoch
  o.keep_last = 4;
  o.average_last = 4;
  TrainerOptions full = o, snapshots = o;
  full.save_every = 3;
  snapshots.keep_every = 3;
  const std::string full_dir = run_folder("keep-full"), snap_dir = run_folder("keep-snapshots");
  std::vector<int64_t> full_evaluated, snap_evaluated;
  {
    Trainer a(tiny_config(), full, train, val, full_dir);
    TrainerHooks hooks;
    hooks.evaluated = [&](const Evaluation& e) { full_evaluated.push_back(e.step); };
    CHECK(a.run(hooks));
    Trainer b(tiny_config(), snapshots, train, val, snap_dir);
    hooks.evaluated = [&](const Evaluation& e) { snap_evaluated.push_back(e.step); };
    CHECK(b.run(hooks));
    CHECK(parameters_of(a) == parameters_of(b));  // snapshots do not change the training
  }
  CHECK(snap_evaluated == std::vector<int64_t>{14, 20});  // validation only at the epoch's end and the last step
  CHECK(full_evaluated == std::vector<int64_t>{3, 6, 9, 12, 14, 15, 18, 20});
  // The last 4 of 3, 6, 9, 12, 14, 15, 18, 20 in both, with the same weights.
  const std::set<std::string> last4{"step-00000014.safetensors", "step-00000015.safetensors",
                                    "step-00000018.safetensors", "step-00000020.safetensors"};
  CHECK(kept_files(snap_dir) == last4);
  CHECK(kept_files(full_dir) == last4);
  for (const std::string& name : last4) CHECK(tensors_of(snap_dir + "/" + name) == tensors_of(full_dir + "/" + name));
  CHECK(tensors_of(snap_dir + "/average/model.safetensors") == tensors_of(full_dir + "/average/model.safetensors"));
  CHECK(nn::load_safetensors(snap_dir + "/step-00000018.safetensors").metadata.at("step") == "18");

  // Kept models past the state's step (a run killed between a snapshot and its next
  // state) are removed on resume: the resumed run writes its own.
  fs::copy_file(snap_dir + "/step-00000018.safetensors", snap_dir + "/step-00000099.safetensors");
  auto resumed = Trainer::resume(snap_dir, train, val, [](TrainerOptions& saved) { saved.max_steps = 21; });
  CHECK_FALSE(fs::exists(snap_dir + "/step-00000099.safetensors"));
  CHECK(fs::exists(snap_dir + "/step-00000020.safetensors"));

  TrainerOptions alone = small_run();
  alone.keep_every = 3;
  CHECK(error_of([&] {
          Trainer(tiny_config(), alone, train, val, run_folder("keep-alone"));
        }).find("--keep-every 3 keeps snapshots among the last --keep-last") != std::string::npos);
}

TEST_CASE("--keep-per-epoch: snapshots at evenly spaced points of each epoch, its end one of them") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.max_steps = 30;  // 14 updates an epoch: thirds end after 5, 10 and 14 of them
  o.keep_last = 10;
  o.keep_per_epoch = 3;
  const std::string dir = run_folder("keep-per-epoch");
  std::vector<int64_t> evaluated;
  Trainer a(tiny_config(), o, train, val, dir);
  TrainerHooks hooks;
  hooks.evaluated = [&](const Evaluation& e) { evaluated.push_back(e.step); };
  CHECK(a.run(hooks));
  CHECK(evaluated == std::vector<int64_t>{14, 28, 30});
  std::set<std::string> expected;
  for (int64_t step : {5, 10, 14, 19, 24, 28, 30}) expected.insert(fmt::format("step-{:08d}.safetensors", step));
  CHECK(kept_files(dir) == expected);

  TrainerOptions both = o, alone = small_run();
  both.keep_every = 4;
  alone.keep_per_epoch = 2;
  CHECK(error_of([&] { Trainer(tiny_config(), both, train, val, run_folder("keep-both")); }) ==
        "train: --keep-every 4 and --keep-per-epoch 3 both place snapshots; give one");
  CHECK(error_of([&] {
          Trainer(tiny_config(), alone, train, val, run_folder("keep-per-epoch-alone"));
        }).find("--keep-per-epoch 2 keeps snapshots among the last --keep-last") != std::string::npos);
}

TEST_CASE("best/ by a validation score (e.g. BLEU): the highest score, not the lowest loss, also across a resume") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.max_steps = 12;
  o.save_every = 4;
  const std::string dir = run_folder("best-by-score");
  // A score that peaks at step 4, while the validation loss goes on falling.
  auto score_hooks = [](std::vector<Evaluation>& seen, const Trainer*& trainer) {
    TrainerHooks hooks;
    hooks.validation_score = [&trainer](Transformer& model) {
      CHECK_FALSE(model.is_training());  // scored in eval mode
      const double from_peak = static_cast<double>(trainer->step() - 4);
      return 100 - from_peak * from_peak;
    };
    hooks.evaluated = [&seen](const Evaluation& e) { seen.push_back(e); };
    return hooks;
  };
  std::vector<Evaluation> seen;
  const Trainer* current = nullptr;
  {
    Trainer t(tiny_config(), o, train, val, dir);
    current = &t;
    CHECK(t.run(score_hooks(seen, current)));
    CHECK(t.model().is_training());  // back in training mode after each score
  }
  REQUIRE(seen.size() == 3);  // steps 4, 8, 12
  CHECK(seen[2].step == 12);
  CHECK(std::min(seen[1].val_loss, seen[2].val_loss) < seen[0].val_loss);  // by loss, best/ would move on
  CHECK(*seen[0].val_score == 100);
  CHECK((seen[0].best && !seen[1].best && !seen[2].best));
  CHECK(nn::load_safetensors(dir + "/best/model.safetensors").metadata.at("step") == "4");
  CHECK(nn::load_safetensors(dir + "/best/model.safetensors").metadata.at("val_score") == "100.000000");
  // Resumed, the run remembers the best score: later, lower scores do not replace it.
  auto resumed = Trainer::resume(dir, train, val, [](TrainerOptions& saved) { saved.max_steps = 16; });
  current = resumed.get();
  seen.clear();
  CHECK(resumed->run(score_hooks(seen, current)));
  REQUIRE(!seen.empty());
  CHECK(seen.back().step == 16);
  CHECK(*seen.back().val_score == 100 - 12 * 12);
  for (const Evaluation& e : seen) CHECK_FALSE(e.best);
  CHECK(nn::load_safetensors(dir + "/best/model.safetensors").metadata.at("step") == "4");
}

TEST_CASE("a diverged run stops with an error naming the step, and every file saved before stays as it was") {
  const auto train = copy_pairs(120, 7), val = copy_pairs(16, 8);
  TrainerOptions o = small_run();
  o.save_every = 4;
  o.max_steps = 40;
  // A parameter turns NaN after update `poison_at` (what a diverging run does);
  // on a save step the validation loss catches it, otherwise the next step's loss.
  for (auto [poison_at, what, at] : {std::tuple{6, "the training loss", 7}, {8, "the validation loss", 8}}) {
    CAPTURE(poison_at);
    const std::string dir = run_folder(fmt::format("diverged{}", poison_at));
    Trainer t(tiny_config(), o, train, val, dir);
    std::string model_bytes, state_bytes;
    TrainerHooks hooks;
    hooks.evaluated = [&](const Evaluation& e) {
      model_bytes = bytes_of(dir + "/model.safetensors");
      state_bytes = bytes_of(Trainer::state_path(dir));
    };
    hooks.step_done = [&](const StepReport& r) {
      if (r.step != poison_at) return;
      NoGradGuard no_grad;
      fill_(t.model().parameters()[0], std::nan(""));  // the shared embedding: every logit turns NaN
    };
    const std::string error = error_of([&] { t.run(hooks); });
    CHECK(error.starts_with(fmt::format("train: {} is nan at step {} (learning rate", what, at)));
    CHECK(error.ends_with(fmt::format("stopped without saving: '{}/model.safetensors' keeps step 4", dir)));
    CHECK(bytes_of(dir + "/model.safetensors") == model_bytes);
    CHECK(bytes_of(Trainer::state_path(dir)) == state_bytes);
    CHECK(Trainer::read_state(dir).step == 4);
  }
  // Interrupted with a NaN parameter: the state is not written either.
  const std::string dir = run_folder("diverged_stop");
  Trainer t(tiny_config(), o, train, val, dir);
  std::atomic<bool> stop{false};
  TrainerHooks hooks;
  hooks.step_done = [&](const StepReport& r) {
    if (r.step != 5) return;
    NoGradGuard no_grad;
    fill_(t.model().parameters()[0], std::nan(""));
    stop = true;
  };
  hooks.stop = &stop;
  CHECK(error_of([&] { t.run(hooks); }).starts_with("train: parameter 'src_embed.weight' is not finite after step 5"));
  CHECK(Trainer::read_state(dir).step == 4);
}

TEST_CASE("the exact reduction's buckets, overlapped or not and on the stand-in device, keep the bits of one sum") {
  enable_standin_device();
  const std::vector<EncodedPair> train = copy_pairs(60, 1), val = copy_pairs(8, 2);
  auto run = [&](Device device, double bucket_mb, bool overlap) {
    TrainerOptions o = small_run();
    o.reduce = MicroBatchSum::exact;
    o.accum = 3;
    o.max_steps = 3;
    o.device = device;
    o.bucket_mb = bucket_mb;
    o.overlap = overlap;
    Trainer trainer(tiny_config(), o, train, val, run_folder("buckets"));
    Record r;
    trainer.run(recording(r));
    REQUIRE(trainer.reducer() != nullptr);
    CHECK(trainer.reducer()->overlaps() == (overlap && device.is_cpu()));
    std::vector<std::vector<float>> params;
    for (const Tensor& p : trainer.model().parameters()) params.push_back(p.detach().to(kCPU).to_vector<float>());
    return std::pair{r.losses, params};
  };
  const auto whole = run(kCPU, 25, false);
  REQUIRE(whole.first.size() == 3);
  for (auto [device, bucket_mb, overlap] :
       {std::tuple{kCPU, 0.01, true}, std::tuple{kCPU, 0.01, false}, std::tuple{Device::standin(0), 0.01, true}}) {
    CAPTURE(device);
    CAPTURE(bucket_mb);
    CAPTURE(overlap);
    const auto other = run(device, bucket_mb, overlap);
    CHECK(other.first == whole.first);
    CHECK(other.second == whole.second);
  }
}
