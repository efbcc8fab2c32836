// Layers, optimizers and the Transformer from Python: `loom.nn`, `loom.optim`,
// `loom.models`. A model folder from `loom train` loads with its vocabulary, then
// translates (beam search, as `loom translate`) and shows its attention maps.
#include <omp.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/models.h"
#include "loom/models/attention_maps.h"
#include "loom/nn/checkpoint.h"
#include "loom/nn/layers.h"
#include "loom/optim/optimizer.h"
#include "model_folder.h"

namespace loom::python {

namespace {

// A model folder: the Transformer (eval mode) and its SentencePiece vocabulary.
// A Python str as UTF-8, or a TypeError/ValueError naming `what` (None, bytes, a lone
// surrogate) instead of pybind11's signature list.
std::string text_of(const py::handle& value, const std::string& what) {
  if (!py::isinstance<py::str>(value)) throw py::type_error(what + " is " + type_name(value) + ", not str");
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    throw py::value_error(what + " is not valid Unicode text (it holds a lone surrogate)");
  }
  return std::string(utf8, static_cast<size_t>(size));
}

struct Translator {
  tools::ModelFolder folder;

  // Beam search of one sentence at a time: a sentence's translation never depends on
  // which others share its batch (as in `loom translate`, which batches equal lengths).
  // On the CPU each thread translates whole sentences (models::decode_batches).
  // With other folders, an ensemble: the mean of the models' log-probabilities.
  std::vector<std::string> translate(const std::vector<std::string>& sentences, int64_t beam, double alpha,
                                     int64_t extra_len, int64_t horizon, const std::vector<const Translator*>& others) {
    // The ranges `loom translate` checks its options against (NaN is in none).
    auto check = [](const char* name, double value, double low, double high) {
      if (!(value >= low && value <= high))
        throw py::value_error(
            fmt::format("ModelFolder.translate: {} must be in [{}, {}], got {}", name, low, high, value));
    };
    check("beam", static_cast<double>(beam), 1, 1000);
    check("alpha", alpha, 0, 10);
    check("extra_len", static_cast<double>(extra_len), 0, models::TransformerConfig::kMaxLen);
    check("horizon", static_cast<double>(horizon), 0, 1 << 20);
    std::vector<models::Transformer*> ensemble{folder.model.get()};
    for (const Translator* other : others) {
      LOOM_CHECK(other != nullptr, "ModelFolder.translate: ensemble holds None, not a model folder");
      tools::check_same_vocabulary(folder, other->folder, "ModelFolder.translate");
      ensemble.push_back(other->folder.model.get());
    }
    const int64_t max_len = models::shortest_max_len(ensemble);
    std::vector<std::vector<int64_t>> outputs(sentences.size());
    auto decode = [&](size_t i) {
      if (models::is_blank(sentences[i])) return;
      std::vector<int64_t> ids = folder.vocab->encode(sentences[i]);
      ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(max_len - 1)));
      ids.push_back(models::Vocabulary::kEos);
      const int64_t length = static_cast<int64_t>(ids.size());
      Tensor src = from_vector(ids, {1, length});
      const models::BeamOptions search{.beam = beam,
                                       .length_penalty = alpha,
                                       .max_len = std::min<int64_t>(length + extra_len, max_len - 1),
                                       .horizon = horizon};
      outputs[i] =
          std::move(models::best_tokens(ensemble, src, models::Vocabulary::kBos, models::Vocabulary::kEos, search)[0]);
    };
    models::decode_batches(ensemble, sentences.size(), omp_get_max_threads(), decode);
    std::vector<std::string> out;
    for (size_t i = 0; i < sentences.size(); ++i)
      out.push_back(models::is_blank(sentences[i]) ? std::string() : folder.vocab->decode(outputs[i]));
    return out;
  }

  // Every layer's attention weights for a sentence and its translation, as NumPy-ready tensors.
  py::dict attention(const std::string& source, const std::string& target) {
    std::vector<int64_t> src = folder.vocab->encode(source), tgt = folder.vocab->encode(target);
    src.push_back(models::Vocabulary::kEos);
    tgt.insert(tgt.begin(), models::Vocabulary::kBos);
    models::AttentionMaps maps = models::attention_maps(*folder.model, src, tgt);
    auto pieces = [&](const std::vector<int64_t>& ids) {
      std::vector<std::string> out;
      for (int64_t id : ids) out.push_back(folder.vocab->piece(id));
      return out;
    };
    py::dict d;
    d["encoder_self"] = maps.encoder_self;
    d["decoder_self"] = maps.decoder_self;
    d["cross"] = maps.cross;
    d["source_pieces"] = pieces(src);
    d["target_pieces"] = pieces(tgt);
    return d;
  }
};

}  // namespace

void bind_models(py::module_& m) {
  py::module_ nn_module = m.def_submodule("nn", "layers with named parameters, as torch.nn");
  py::class_<nn::Module>(nn_module, "Module")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("parameters", &nn::Module::parameters)
      .def("parameter_count", &nn::Module::parameter_count)
      .def("train", &nn::Module::train, py::arg("mode") = true)
      .def("eval", &nn::Module::eval)
      .def_property_readonly("training", &nn::Module::is_training)
      .def("zero_grad", &nn::Module::zero_grad)
      .def("to", [](nn::Module& module, const std::string& device) { module.to(parse_device(device)); })
      .def(
          "save", [](const nn::Module& module, const std::string& path) { nn::save(module, path); }, py::arg("path"),
          "the parameters to a safetensors file")
      .def(
          "load", [](nn::Module& module, const std::string& path) { nn::load(module, path); }, py::arg("path"));
  py::class_<nn::Linear, nn::Module>(nn_module, "Linear")
      .def(py::init([](int64_t in, int64_t out, bool bias) { return std::make_unique<nn::Linear>(in, out, bias); }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def("__call__", &nn::Linear::forward)
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias",
                             [](const nn::Linear& l) { return l.bias.defined() ? py::cast(l.bias) : py::none(); });
  py::class_<nn::Embedding, nn::Module>(nn_module, "Embedding")
      .def(py::init([](int64_t vocab, int64_t dim, std::optional<int64_t> padding_idx) {
             // PyTorch's padding_idx: None for none, a negative one counts from the end (C++'s -1 is none).
             if (padding_idx && (*padding_idx < -vocab || *padding_idx >= vocab))
               throw py::value_error(
                   fmt::format("Embedding: padding_idx {} is outside [-{}, {})", *padding_idx, vocab, vocab));
             const int64_t row = !padding_idx ? -1 : *padding_idx < 0 ? *padding_idx + vocab : *padding_idx;
             return std::make_unique<nn::Embedding>(vocab, dim, row);
           }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("padding_idx") = py::none())
      .def("__call__", &nn::Embedding::forward)
      .def_readonly("weight", &nn::Embedding::weight);
  py::class_<nn::LayerNorm, nn::Module>(nn_module, "LayerNorm")
      .def(py::init([](int64_t dim, double eps) { return std::make_unique<nn::LayerNorm>(dim, eps); }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5)
      .def("__call__", &nn::LayerNorm::forward);
  py::class_<nn::Dropout, nn::Module>(nn_module, "Dropout")
      .def(py::init([](double p) { return std::make_unique<nn::Dropout>(p); }), py::arg("p") = 0.5)
      .def("__call__", &nn::Dropout::forward);

  py::module_ optim_module = m.def_submodule("optim", "optimizers over a list of parameters, as torch.optim");
  py::class_<optim::Optimizer>(optim_module, "Optimizer")
      .def("step", &optim::Optimizer::step, Release())
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr);
  py::class_<optim::SGD, optim::Optimizer>(optim_module, "SGD")
      .def(py::init([](std::vector<Tensor> params, double lr, double momentum) {
             return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = lr, .momentum = momentum});
           }),
           py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0);
  py::class_<optim::Adam, optim::Optimizer>(optim_module, "Adam")
      .def(py::init([](std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps) {
             return std::make_unique<optim::Adam>(std::move(params),
                                                  optim::AdamOptions{.lr = lr, .betas = betas, .eps = eps});
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>{0.9, 0.999},
           py::arg("eps") = 1e-8);

  py::module_ models_module = m.def_submodule("models", "the Transformer of 'Attention Is All You Need'");
  py::class_<models::TransformerConfig>(models_module, "TransformerConfig")
      .def_static("preset", &models::presets::by_name, py::arg("name"), py::arg("vocab"),
                  "tiny, small, base or big, for a vocabulary of `vocab` pieces")
      .def_readwrite("d_model", &models::TransformerConfig::d_model)
      .def_readwrite("d_ff", &models::TransformerConfig::d_ff)
      .def_readwrite("heads", &models::TransformerConfig::heads)
      .def_readwrite("dropout", &models::TransformerConfig::dropout)
      .def("to_json", &models::TransformerConfig::to_json);
  py::class_<models::Transformer, nn::Module>(models_module, "Transformer")
      .def(py::init([](const models::TransformerConfig& config) {
             config.validate();
             return std::make_unique<models::Transformer>(config);
           }),
           py::arg("config"))
      .def("__call__", &models::Transformer::forward, py::arg("src"), py::arg("tgt_in"), Release(),
           "logits [B, T, vocab] for source ids [B, S] and decoder inputs [B, T] (int64)")
      .def_property_readonly("config", &models::Transformer::config);
  py::class_<Translator>(models_module, "ModelFolder")
      .def_property_readonly(
          "model", [](Translator& t) { return t.folder.model.get(); }, py::return_value_policy::reference_internal)
      .def("encode",
           [](const Translator& t, const py::object& text) {
             return t.folder.vocab->encode(text_of(text, "ModelFolder.encode: text"));
           })
      .def("decode", [](const Translator& t, const std::vector<int64_t>& ids) { return t.folder.vocab->decode(ids); })
      .def(
          "translate",
          [](Translator& t, const py::iterable& sentences, int64_t beam, double alpha, int64_t extra_len,
             int64_t horizon, const std::vector<const Translator*>& ensemble) {
            std::vector<std::string> texts;
            for (const auto& sentence : sentences)
              texts.push_back(text_of(sentence, fmt::format("ModelFolder.translate: sentence {}", texts.size())));
            ReleasedCall during;  // the GIL released, Ctrl-C stops it
            return t.translate(texts, beam, alpha, extra_len, horizon, ensemble);
          },
          py::arg("sentences"), py::arg("beam") = 4, py::arg("alpha") = 0.6, py::arg("extra_len") = 50,
          py::arg("horizon") = models::BeamOptions{}.horizon, py::arg("ensemble") = std::vector<const Translator*>{},
          "beam search, as `loom translate` (horizon: as its --horizon; 0: the exact stopping bound); ensemble: "
          "other model folders with this one's vocabulary, decoded together (the mean of their log-probabilities, "
          "as `loom translate --model A --model B`)")
      .def(
          "attention",
          [](Translator& t, const py::object& source, const py::object& target) {
            return t.attention(text_of(source, "ModelFolder.attention: source"),
                               text_of(target, "ModelFolder.attention: target"));
          },
          py::arg("source"), py::arg("target"),
          "every layer's attention weights [heads, queries, keys] and the pieces they are over");
  models_module.def(
      "load",
      [](const std::string& folder, bool verify_checksums) {
        return Translator{tools::load_model_folder(folder, "loom.models.load",
                                                   verify_checksums ? nn::Checksums::verify : nn::Checksums::skip)};
      },
      py::arg("folder"), py::arg("verify_checksums") = true,
      "a model folder written by `loom train` (its model.safetensors and vocabulary); verify_checksums=False "
      "skips each tensor's CRC-32 check (faster; a damaged file goes unnoticed)");
}

}  // namespace loom::python
