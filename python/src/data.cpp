// Corpus stores from Python: `loom.data.prepare` writes one (as `loom data prepare`),
// `loom.data.Store` maps one: its length, pair i as id tensors, and an epoch's
// batches (similar lengths under a token budget, shuffled by a seed, as `loom train`
// makes them), each made when the iterator reaches it.
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/models/corpus_store.h"

namespace loom::python {

namespace {

// One epoch of a store's batches, in the order `loom train` would take them.
struct Batches {
  std::shared_ptr<const models::CorpusStore> store;
  models::BatchPlan plan;
  size_t next = 0;

  models::Batch next_batch() {
    if (next >= plan.size()) throw py::stop_iteration();
    return models::make_batch(*store, plan[next++]);
  }
};

py::dict manifest_of(const models::StoreManifest& m) {
  py::dict d;
  d["src"] = m.src;
  d["tgt"] = m.tgt;
  d["pairs"] = m.pairs;
  d["tokens"] = m.tokens;
  d["pieces"] = m.pieces;
  d["fingerprint"] = m.fingerprint;
  d["read"] = m.read;
  d["dropped"] = py::dict(py::arg("longer") = m.dropped_long, py::arg("ratio") = m.dropped_ratio,
                          py::arg("empty") = m.dropped_empty, py::arg("duplicates") = m.dropped_duplicates);
  return d;
}

}  // namespace

void bind_data(py::module_& m) {
  py::module_ data = m.def_submodule("data", "corpus stores: a corpus encoded once, mapped by every run");
  py::class_<models::Batch>(data, "Batch")
      .def_readonly("src", &models::Batch::src, "[B, S] source ids, eos-ended, padded with 0")
      .def_readonly("tgt_in", &models::Batch::tgt_in, "[B, T] bos + target ids (the decoder's input)")
      .def_readonly("tgt_out", &models::Batch::tgt_out, "[B, T] target ids + eos (what the loss compares with)")
      .def_readonly("src_tokens", &models::Batch::src_tokens)
      .def_readonly("tgt_tokens", &models::Batch::tgt_tokens)
      .def("__repr__", [](const models::Batch& b) {
        return fmt::format("loom.data.Batch(sentences={}, src_tokens={}, tgt_tokens={})", b.src.shape()[0],
                           b.src_tokens, b.tgt_tokens);
      });
  py::class_<Batches>(data, "Batches")
      .def("__iter__", [](Batches& b) -> Batches& { return b; })
      .def("__next__", &Batches::next_batch)
      .def("__len__", [](const Batches& b) { return b.plan.size(); });
  py::class_<models::CorpusStore, std::shared_ptr<models::CorpusStore>>(data, "Store")
      .def(py::init([](const std::string& path) { return std::make_shared<models::CorpusStore>(path); }),
           py::arg("path"), "a store written by `loom data prepare` (or loom.data.prepare), mapped read-only")
      .def("__len__", [](const models::CorpusStore& s) { return s.size(); })
      .def(
          "__getitem__",
          [](const models::CorpusStore& s, int64_t i) {
            if (i < 0) i += s.size();
            if (i < 0 || i >= s.size())
              throw py::index_error(fmt::format("loom.data.Store: pair {} of {}", i, s.size()));
            const models::PairLength n = s.lengths()[static_cast<size_t>(i)];
            Tensor src = Tensor::empty({n.src}, {DType::i64}), tgt = Tensor::empty({n.tgt}, {DType::i64});
            s.read_pair(i, src.data<int64_t>(), tgt.data<int64_t>());
            return py::make_tuple(src, tgt);
          },
          py::arg("i"), "pair i as (source ids, target ids), int64 tensors without bos/eos")
      .def_property_readonly("manifest", [](const models::CorpusStore& s) { return manifest_of(s.manifest()); })
      .def_property_readonly("vocabulary", &models::CorpusStore::vocabulary_path, "the store's spm.model")
      .def(
          "batches",
          [](const std::shared_ptr<models::CorpusStore>& s, int64_t max_tokens, int64_t max_len, uint64_t seed,
             bool regroup) {
            Generator gen(seed);
            auto plan = models::plan_batches(s->lengths(), models::fitting_pairs(s->lengths(), max_len), max_tokens,
                                             max_len, gen, regroup ? models::Grouping::drawn : models::Grouping::fixed);
            return Batches{s, std::move(plan)};
          },
          py::arg("max_tokens") = 4096, py::arg("max_len") = 128, py::arg("seed") = 1, py::arg("regroup") = false,
          "one epoch of batches of similar-length pairs, at most max_tokens padded tokens each, in an order drawn "
          "from seed (pairs longer than max_len - 1 pieces left out)");
  data.def(
      "prepare",
      [](const std::string& data_dir, const std::string& out, const std::string& src, const std::string& tgt,
         int64_t vocab, int64_t vocab_sample, const std::string& vocabulary) {
        models::PrepareOptions o{.data = data_dir, .src = src, .tgt = tgt, .out = out, .vocab = vocab};
        o.vocab_sample = vocab_sample;
        o.vocabulary = vocabulary;
        models::StoreManifest written;
        {
          ReleasedCall during;  // SentencePiece and the encoding run without the GIL
          written = models::prepare_store(o);
        }
        return manifest_of(written);
      },
      py::arg("data"), py::arg("out"), py::arg("src") = "de", py::arg("tgt") = "en", py::arg("vocab") = 8000,
      py::arg("vocab_sample") = models::PrepareOptions{}.vocab_sample, py::arg("vocabulary") = "",
      "as `loom data prepare`: <data>/train.<src> and .<tgt> encoded into the store `out`; returns its manifest");
}

}  // namespace loom::python
