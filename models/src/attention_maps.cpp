#include "loom/models/attention_maps.h"

#include "loom/ops.h"

namespace loom::models {

AttentionMaps attention_maps(Transformer& model, const std::vector<int64_t>& src, const std::vector<int64_t>& tgt_in) {
  LOOM_CHECK(!src.empty() && !tgt_in.empty(),
             "attention_maps: the source ({} ids) and the target ({} ids) must "
             "not be empty",
             src.size(), tgt_in.size());
  std::vector<nn::MultiHeadAttention*> modules;
  for (auto& layer : model.encoder) modules.push_back(&layer->self_attn);
  for (auto& layer : model.decoder) {
    modules.push_back(&layer->self_attn);
    modules.push_back(&layer->cross_attn);
  }
  for (auto* m : modules) m->keep_weights(true);
  nn::EvalModeGuard eval(model);
  struct StopKeeping {  // also on an error
    std::vector<nn::MultiHeadAttention*>& modules;
    ~StopKeeping() {
      for (auto* m : modules) m->keep_weights(false);
    }
  } stop_keeping{modules};

  NoGradGuard no_grad;
  const Device device = model.src_embed.weight.device();
  auto ids = [&](const std::vector<int64_t>& v) {
    return from_vector(v, {1, static_cast<int64_t>(v.size())}, {DType::i64}).to(device);
  };
  model(ids(src), ids(tgt_in));
  // [1, heads, Tq, Tk] -> [heads, Tq, Tk] float32 on the CPU
  auto take = [](const nn::MultiHeadAttention& m) {
    const Tensor& w = m.last_weights();
    return to_dtype(w, DType::f32).to(kCPU).reshape({w.shape()[1], w.shape()[2], w.shape()[3]});
  };
  AttentionMaps maps;
  for (auto& layer : model.encoder) maps.encoder_self.push_back(take(layer->self_attn));
  for (auto& layer : model.decoder) {
    maps.decoder_self.push_back(take(layer->self_attn));
    maps.cross.push_back(take(layer->cross_attn));
  }
  return maps;
}

}  // namespace loom::models
