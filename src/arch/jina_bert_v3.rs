//! Jina BERT v3 (jina-embeddings-v3's XLM-RoBERTa): BERT's encoder with NeoX rotation instead
//! of a position table, and no classifier head.

use super::bert;
use crate::model::spec::Facts;

pub const JINA_BERT_V3: bert::Member = bert::Member {
    facts: Facts {
        name: "jina-bert-v3",
        about: "An encoder: BERT's layers with rotary positions: no cache, `llama_encode`, which `llama_decode` \
            calls for it as llama.cpp does; one ubatch per batch.",
        ..bert::LAYER_NORMED
    },
    variant: bert::Variant {
        rope: true,
        gated: false,
    },
    size_label: |hp| if hp.n_layer == 24 { "558M" } else { "?B" },
};
