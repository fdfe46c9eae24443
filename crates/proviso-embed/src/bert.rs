//! The BERT encoder (embeddings, then self-attention layers) that all-MiniLM-L6-v2 is, on
//! candle's tensors and layers. Written here rather than taken from `candle-transformers`,
//! whose hundreds of models took minutes of every clean build for the one used: the
//! operations and their order are those of the reference implementation, so the embeddings
//! are the same (test `the_encoder_computes_what_the_reference_bert_does`).

use candle_core::{Module, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde_json::Value;

/// The architecture a `config.json` describes, as far as the encoder uses it.
#[derive(Debug)]
pub(crate) struct Config {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f64,
}

impl Config {
    /// Reads a BERT `config.json`; an error names the key that is missing or unsupported.
    pub(crate) fn from_json(config: &Value) -> Result<Self, String> {
        // A key left out takes BERT's default where it has one; one given must be a size.
        let size_or = |key: &str, default: Option<usize>| -> Result<usize, String> {
            match config.get(key) {
                None => default.ok_or_else(|| format!("`{key}` is missing")),
                Some(value) => value
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| format!("`{key}` is not a whole number")),
            }
        };
        let size = |key: &str| size_or(key, None);
        // The reference's `gelu` is the exact (erf) form; a model trained with another
        // activation would be run wrongly, so it is refused.
        match config.get("hidden_act").and_then(Value::as_str) {
            Some("gelu") | None => {}
            Some(other) => return Err(format!("`hidden_act` {other:?} is not supported")),
        }
        if let Some(kind) = config
            .get("position_embedding_type")
            .and_then(Value::as_str)
        {
            if kind != "absolute" {
                return Err(format!(
                    "`position_embedding_type` {kind:?} is not supported"
                ));
            }
        }
        let config = Self {
            vocab_size: size("vocab_size")?,
            hidden_size: size("hidden_size")?,
            num_hidden_layers: size("num_hidden_layers")?,
            num_attention_heads: size("num_attention_heads")?,
            intermediate_size: size("intermediate_size")?,
            max_position_embeddings: size("max_position_embeddings")?,
            type_vocab_size: size_or("type_vocab_size", Some(2))?,
            layer_norm_eps: config
                .get("layer_norm_eps")
                .and_then(Value::as_f64)
                .unwrap_or(1e-12),
        };
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err("`hidden_size` is not a multiple of `num_attention_heads`".into());
        }
        Ok(config)
    }
}

struct Embeddings {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder<'_>, c: &Config) -> candle_core::Result<Self> {
        Ok(Self {
            words: embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
            positions: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_types: embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: layer_norm(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, ids: &Tensor, types: &Tensor) -> candle_core::Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let summed = (self.words.forward(ids)? + self.token_types.forward(types)?)?;
        let len = u32::try_from(len).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let positions = Tensor::arange(0u32, len, ids.device())?;
        let summed = summed.broadcast_add(&self.positions.forward(&positions)?)?;
        self.norm.forward(&summed)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    out: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Layer {
    fn load(vb: VarBuilder<'_>, c: &Config) -> candle_core::Result<Self> {
        let h = c.hidden_size;
        let attention = vb.pp("attention");
        let own = attention.pp("self");
        Ok(Self {
            query: linear(h, h, own.pp("query"))?,
            key: linear(h, h, own.pp("key"))?,
            value: linear(h, h, own.pp("value"))?,
            attention_out: linear(h, h, attention.pp("output").pp("dense"))?,
            attention_norm: layer_norm(
                h,
                c.layer_norm_eps,
                attention.pp("output").pp("LayerNorm"),
            )?,
            intermediate: linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            out: linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            out_norm: layer_norm(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// `(batch, tokens, hidden)` as `(batch, heads, tokens, head size)`.
    fn split_heads(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, tokens, _) = xs.dims3()?;
        xs.reshape((batch, tokens, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let query = self.split_heads(&self.query.forward(hidden)?)?;
        let key = self.split_heads(&self.key.forward(hidden)?)?;
        let value = self.split_heads(&self.value.forward(hidden)?)?;
        // The head size is at most a few thousand: exact as an f64.
        #[allow(clippy::cast_precision_loss)]
        let scale = (self.head_size as f64).sqrt();
        let scores = (query.matmul(&key.t()?)? / scale)?.broadcast_add(mask)?;
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context = probs
            .matmul(&value)?
            .transpose(1, 2)?
            .contiguous()?
            .flatten_from(D::Minus2)?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + hidden)?)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.out_norm
            .forward(&(self.out.forward(&inner)? + &attended)?)
    }
}

/// The encoder: the last layer's hidden states for a batch of token ids.
pub(crate) struct Bert {
    embeddings: Embeddings,
    layers: Vec<Layer>,
}

impl Bert {
    /// The weights under `vb` (at its root, or under `bert.` as a fine-tuned BERT's are).
    pub(crate) fn load(vb: VarBuilder<'_>, config: &Config) -> candle_core::Result<Self> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let encoder = vb.pp("encoder");
        Ok(Self {
            embeddings: Embeddings::load(vb.pp("embeddings"), config)?,
            layers: (0..config.num_hidden_layers)
                .map(|i| Layer::load(encoder.pp(format!("layer.{i}")), config))
                .collect::<candle_core::Result<_>>()?,
        })
    }

    /// Hidden states `(batch, tokens, hidden)` for `ids` and `types` `(batch, tokens)`,
    /// attending only where `mask` (`(batch, tokens)`, 1 or 0) is 1.
    pub(crate) fn forward(
        &self,
        ids: &Tensor,
        types: &Tensor,
        mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let mut hidden = self.embeddings.forward(ids, types)?;
        // A padded position gets the lowest score, so it takes no weight in the softmax.
        let mask = mask.unsqueeze(1)?.unsqueeze(1)?.to_dtype(hidden.dtype())?;
        let mask = (mask.ones_like()? - &mask)?
            .broadcast_mul(&Tensor::new(f32::MIN, mask.device())?.to_dtype(mask.dtype())?)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &mask)?;
        }
        Ok(hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::Config;
    use serde_json::json;

    fn minilm() -> serde_json::Value {
        json!({"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
            "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu",
            "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
            "position_embedding_type": "absolute"})
    }

    #[test]
    fn a_configuration_the_encoder_cannot_run_is_refused_by_its_key() {
        assert!(Config::from_json(&minilm()).is_ok());
        for (key, value, named) in [
            ("hidden_act", json!("relu"), "`hidden_act`"),
            (
                "position_embedding_type",
                json!("relative_key"),
                "`position_embedding_type`",
            ),
            ("hidden_size", json!(385), "`hidden_size`"),
            ("num_hidden_layers", json!("six"), "`num_hidden_layers`"),
        ] {
            let mut config = minilm();
            config[key] = value;
            let error = Config::from_json(&config).unwrap_err();
            assert!(error.contains(named), "{key}: {error}");
        }
        let mut config = minilm();
        config.as_object_mut().map(|c| c.remove("vocab_size"));
        assert!(Config::from_json(&config)
            .unwrap_err()
            .contains("`vocab_size`"));
    }
}
