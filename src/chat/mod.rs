//! Chat templates the way llama.cpp applies them without a Jinja engine: a template (a builtin
//! name, or a model's Jinja template recognised by markers it contains) selects one of a fixed set
//! of formats, and the messages are laid out in that format. Strings are bytes: C callers may pass
//! anything.

#[cfg(test)]
mod tests;

use std::ffi::CStr;

pub struct Message<'a> {
    pub role: &'a [u8],
    pub content: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    ChatMl,
    Llama2,
    Llama2Sys,
    Llama2SysBos,
    Llama2SysStrip,
    MistralV1,
    MistralV3,
    MistralV3Tekken,
    MistralV7,
    MistralV7Tekken,
    Phi3,
    Phi4,
    Falcon3,
    Zephyr,
    Monarch,
    Gemma,
    Orion,
    OpenChat,
    Vicuna,
    VicunaOrca,
    Deepseek,
    Deepseek2,
    Deepseek3,
    DeepseekOcr,
    CommandR,
    Llama3,
    ChatGlm3,
    ChatGlm4,
    GlmEdge,
    MiniCpm,
    Exaone3,
    Exaone4,
    ExaoneMoe,
    RwkvWorld,
    Granite3,
    Granite40,
    Granite41,
    GigaChat,
    Megrez,
    Yandex,
    Bailing,
    BailingThink,
    Bailing2,
    Llama4,
    SmolVlm,
    Dots1,
    HunyuanMoe,
    OpenAiMoe,
    HunyuanDense,
    HunyuanVl,
    KimiK2,
    SeedOss,
    Grok2,
    PanguEmbed,
    SolarOpen,
}

/// The names `llama_chat_builtin_templates` lists, in llama.cpp's (sorted) order.
pub const BUILTIN: &[(&CStr, Format)] = &[
    (c"bailing", Format::Bailing),
    (c"bailing-think", Format::BailingThink),
    (c"bailing2", Format::Bailing2),
    (c"chatglm3", Format::ChatGlm3),
    (c"chatglm4", Format::ChatGlm4),
    (c"chatml", Format::ChatMl),
    (c"command-r", Format::CommandR),
    (c"deepseek", Format::Deepseek),
    (c"deepseek-ocr", Format::DeepseekOcr),
    (c"deepseek2", Format::Deepseek2),
    (c"deepseek3", Format::Deepseek3),
    (c"exaone-moe", Format::ExaoneMoe),
    (c"exaone3", Format::Exaone3),
    (c"exaone4", Format::Exaone4),
    (c"falcon3", Format::Falcon3),
    (c"gemma", Format::Gemma),
    (c"gigachat", Format::GigaChat),
    (c"glmedge", Format::GlmEdge),
    (c"gpt-oss", Format::OpenAiMoe),
    (c"granite", Format::Granite3),
    (c"granite-4.0", Format::Granite40),
    (c"granite-4.1", Format::Granite41),
    (c"grok-2", Format::Grok2),
    (c"hunyuan-dense", Format::HunyuanDense),
    (c"hunyuan-moe", Format::HunyuanMoe),
    (c"hunyuan-vl", Format::HunyuanVl),
    (c"kimi-k2", Format::KimiK2),
    (c"llama2", Format::Llama2),
    (c"llama2-sys", Format::Llama2Sys),
    (c"llama2-sys-bos", Format::Llama2SysBos),
    (c"llama2-sys-strip", Format::Llama2SysStrip),
    (c"llama3", Format::Llama3),
    (c"llama4", Format::Llama4),
    (c"megrez", Format::Megrez),
    (c"minicpm", Format::MiniCpm),
    (c"mistral-v1", Format::MistralV1),
    (c"mistral-v3", Format::MistralV3),
    (c"mistral-v3-tekken", Format::MistralV3Tekken),
    (c"mistral-v7", Format::MistralV7),
    (c"mistral-v7-tekken", Format::MistralV7Tekken),
    (c"monarch", Format::Monarch),
    (c"openchat", Format::OpenChat),
    (c"orion", Format::Orion),
    (c"pangu-embedded", Format::PanguEmbed),
    (c"phi3", Format::Phi3),
    (c"phi4", Format::Phi4),
    (c"rwkv-world", Format::RwkvWorld),
    (c"seed_oss", Format::SeedOss),
    (c"smolvlm", Format::SmolVlm),
    (c"solar-open", Format::SolarOpen),
    (c"vicuna", Format::Vicuna),
    (c"vicuna-orca", Format::VicunaOrca),
    (c"yandex", Format::Yandex),
    (c"zephyr", Format::Zephyr),
];

fn contains(hay: &[u8], needle: &str) -> bool {
    let n = needle.as_bytes();
    n.is_empty() || hay.windows(n.len()).any(|w| w == n)
}

/// The format a template selects: a builtin name, or the first family whose markers the template
/// contains, checked in llama.cpp's order (the order matters: several families share markers).
pub fn detect(tmpl: &[u8]) -> Option<Format> {
    if let Some(&(_, f)) = BUILTIN.iter().find(|(name, _)| name.to_bytes() == tmpl) {
        return Some(f);
    }
    let has = |s: &str| contains(tmpl, s);
    let f = if has("<|im_start|>") {
        if has("<|im_sep|>") {
            Format::Phi4
        } else if has("<end_of_utterance>") {
            Format::SmolVlm
        } else {
            Format::ChatMl
        }
    } else if tmpl.starts_with(b"mistral") || has("[INST]") {
        mistral_or_llama2(tmpl)
    } else if has("<|assistant|>") && has("<|end|>") {
        Format::Phi3
    } else if has("[gMASK]<sop>") {
        Format::ChatGlm4
    } else if has("<|assistant|>") && has("<|user|>") {
        if has("<|tool_declare|>") {
            Format::ExaoneMoe
        } else if has("</s>") {
            Format::Falcon3
        } else {
            Format::GlmEdge
        }
    } else if has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>") {
        Format::GlmEdge
    } else if has("<|user|>") && has("<|endoftext|>") {
        Format::Zephyr
    } else if has("bos_token + message['role']") {
        Format::Monarch
    } else if has("<start_of_turn>") {
        Format::Gemma
    } else if has("'\\n\\nAssistant: ' + eos_token") {
        Format::Orion
    } else if has("GPT4 Correct ") {
        Format::OpenChat
    } else if has("USER: ") && has("ASSISTANT: ") {
        if has("SYSTEM: ") {
            Format::VicunaOrca
        } else {
            Format::Vicuna
        }
    } else if has("### Instruction:") && has("<|EOT|>") {
        Format::Deepseek
    } else if has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>") {
        Format::CommandR
    } else if has("<|start_header_id|>") && has("<|end_header_id|>") {
        Format::Llama3
    } else if has("[gMASK]sop") {
        Format::ChatGlm3
    } else if has("<用户>") {
        Format::MiniCpm
    } else if has("'Assistant: ' + message['content'] + eos_token") {
        Format::Deepseek2
    } else if has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>") {
        Format::Deepseek3
    } else if has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]") {
        if has("[|tool|]") {
            Format::Exaone4
        } else {
            Format::Exaone3
        }
    } else if has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}") {
        Format::RwkvWorld
    } else if has("<|start_of_role|>") {
        if has("<tool_call>") || has("<tools>") {
            if has("g4_default_system_message") {
                Format::Granite40
            } else {
                Format::Granite41
            }
        } else {
            Format::Granite3
        }
    } else if has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]")
    {
        Format::GigaChat
    } else if has("<|role_start|>") {
        Format::Megrez
    } else if has(" Ассистент:") {
        Format::Yandex
    } else if has("<role>ASSISTANT</role>") && has("'HUMAN'") {
        Format::Bailing
    } else if has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>") {
        Format::BailingThink
    } else if has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>") {
        Format::Bailing2
    } else if has("<|header_start|>") && has("<|header_end|>") {
        Format::Llama4
    } else if has("<|endofuserprompt|>") {
        Format::Dots1
    } else if has("<|extra_0|>") && has("<|extra_4|>") {
        Format::HunyuanMoe
    } else if has("<|start|>") && has("<|channel|>") {
        Format::OpenAiMoe
    } else if has("<｜hy_Assistant｜>") && has("<｜hy_begin▁of▁sentence｜>") {
        Format::HunyuanVl
    } else if has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>") {
        Format::HunyuanDense
    } else if has("<|im_assistant|>assistant<|im_middle|>") {
        Format::KimiK2
    } else if has("<seed:bos>") {
        Format::SeedOss
    } else if has("'Assistant: '  + message['content'] + '<|separator|>") {
        Format::Grok2
    } else if has("[unused9]系统：[unused10]") {
        Format::PanguEmbed
    } else if has("<|begin|>") && has("<|end|>") && has("<|content|>") {
        Format::SolarOpen
    } else {
        return None;
    };
    Some(f)
}

/// Templates that mention `[INST]` (or are named mistral...): Mistral's official ones by their
/// markers, the Llama 2 variants otherwise.
fn mistral_or_llama2(tmpl: &[u8]) -> Format {
    let has = |s: &str| contains(tmpl, s);
    if has("[SYSTEM_PROMPT]") {
        Format::MistralV7
    } else if has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]") {
        if has(" [INST]") {
            Format::MistralV1
        } else if has("\"[INST]\"") {
            Format::MistralV3Tekken
        } else {
            Format::MistralV3
        }
    } else if has("content.strip()") {
        Format::Llama2SysStrip
    } else if has("bos_token + '[INST]") {
        Format::Llama2SysBos
    } else if has("<<SYS>>") {
        Format::Llama2Sys
    } else {
        Format::Llama2
    }
}

/// Without leading and trailing C-locale white space (space, \t, \n, \v, \f, \r).
fn trim(s: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = s.iter().position(|c| !ws(c)).unwrap_or(s.len());
    let end = s.iter().rposition(|c| !ws(c)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// Appends byte strings.
struct Out(Vec<u8>);

impl Out {
    fn put(&mut self, parts: &[&[u8]]) {
        for p in parts {
            self.0.extend_from_slice(p);
        }
    }

    fn s(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }
}

/// The chat laid out in `format`, with the opening of an assistant turn when `add_ass` is set
/// (for the formats that have one).
pub fn apply(format: Format, chat: &[Message], add_ass: bool) -> Vec<u8> {
    use Format as F;
    let mut o = Out(Vec::new());
    match format {
        F::ChatMl => {
            for m in chat {
                o.put(&[b"<|im_start|>", m.role, b"\n", m.content, b"<|im_end|>\n"]);
            }
            if add_ass {
                o.s("<|im_start|>assistant\n");
            }
        }
        F::MistralV7 | F::MistralV7Tekken => {
            let sp: &[u8] = if format == F::MistralV7 { b" " } else { b"" };
            for m in chat {
                match m.role {
                    b"system" => o.put(&[b"[SYSTEM_PROMPT]", sp, m.content, b"[/SYSTEM_PROMPT]"]),
                    b"user" => o.put(&[b"[INST]", sp, m.content, b"[/INST]"]),
                    _ => o.put(&[sp, m.content, b"</s>"]),
                }
            }
        }
        F::MistralV1 | F::MistralV3 | F::MistralV3Tekken => {
            let lead: &[u8] = if format == F::MistralV1 { b" " } else { b"" };
            let trail: &[u8] = if format == F::MistralV3Tekken { b"" } else { b" " };
            let mut in_turn = false;
            for m in chat {
                if !in_turn {
                    o.put(&[lead, b"[INST]", trail]);
                    in_turn = true;
                }
                match m.role {
                    b"system" => o.put(&[m.content, b"\n\n"]),
                    b"user" => o.put(&[m.content, lead, b"[/INST]"]),
                    _ => {
                        let c = if format == F::MistralV3 {
                            trim(m.content)
                        } else {
                            m.content
                        };
                        o.put(&[trail, c, b"</s>"]);
                        in_turn = false;
                    }
                }
            }
        }
        F::Llama2 | F::Llama2Sys | F::Llama2SysBos | F::Llama2SysStrip => {
            let mut in_turn = true;
            o.s("[INST] ");
            for m in chat {
                let c = if format == F::Llama2SysStrip {
                    trim(m.content)
                } else {
                    m.content
                };
                if !in_turn {
                    in_turn = true;
                    o.s(if format == F::Llama2SysBos {
                        "<s>[INST] "
                    } else {
                        "[INST] "
                    });
                }
                match m.role {
                    b"system" if format == F::Llama2 => o.put(&[c, b"\n"]),
                    b"system" => o.put(&[b"<<SYS>>\n", c, b"\n<</SYS>>\n\n"]),
                    b"user" => o.put(&[c, b" [/INST]"]),
                    _ => {
                        o.put(&[c, b"</s>"]);
                        in_turn = false;
                    }
                }
            }
        }
        F::Phi3 => {
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n", m.content, b"<|end|>\n"]);
            }
            if add_ass {
                o.s("<|assistant|>\n");
            }
        }
        F::Phi4 => {
            for m in chat {
                o.put(&[b"<|im_start|>", m.role, b"<|im_sep|>", m.content, b"<|im_end|>"]);
            }
            if add_ass {
                o.s("<|im_start|>assistant<|im_sep|>");
            }
        }
        F::Falcon3 => {
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n", m.content, b"\n"]);
            }
            if add_ass {
                o.s("<|assistant|>\n");
            }
        }
        F::Zephyr => {
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n", m.content, b"<|endoftext|>\n"]);
            }
            if add_ass {
                o.s("<|assistant|>\n");
            }
        }
        F::Monarch => {
            for (i, m) in chat.iter().enumerate() {
                let bos: &[u8] = if i == 0 { b"" } else { b"<s>" };
                o.put(&[bos, m.role, b"\n", m.content, b"</s>\n"]);
            }
            if add_ass {
                o.s("<s>assistant\n");
            }
        }
        F::Gemma => {
            // No system turn: the system text opens the next non-model turn.
            let mut system = Vec::new();
            for m in chat {
                if m.role == b"system" {
                    system.extend_from_slice(trim(m.content));
                    continue;
                }
                let role: &[u8] = if m.role == b"assistant" { b"model" } else { m.role };
                o.put(&[b"<start_of_turn>", role, b"\n"]);
                if !system.is_empty() && role != b"model" {
                    o.put(&[&system, b"\n\n"]);
                    system.clear();
                }
                o.put(&[trim(m.content), b"<end_of_turn>\n"]);
            }
            if add_ass {
                o.s("<start_of_turn>model\n");
            }
        }
        F::Orion => {
            let mut system = Vec::new();
            for m in chat {
                match m.role {
                    b"system" => system.extend_from_slice(m.content),
                    b"user" => {
                        o.s("Human: ");
                        if !system.is_empty() {
                            o.put(&[&system, b"\n\n"]);
                            system.clear();
                        }
                        o.put(&[m.content, b"\n\nAssistant: </s>"]);
                    }
                    _ => o.put(&[m.content, b"</s>"]),
                }
            }
        }
        F::OpenChat => {
            for m in chat {
                if m.role == b"system" {
                    o.put(&[m.content, b"<|end_of_turn|>"]);
                } else {
                    let mut role = m.role.to_vec();
                    if let Some(c) = role.first_mut() {
                        *c = c.to_ascii_uppercase();
                    }
                    o.put(&[b"GPT4 Correct ", &role, b": ", m.content, b"<|end_of_turn|>"]);
                }
            }
            if add_ass {
                o.s("GPT4 Correct Assistant:");
            }
        }
        F::Vicuna | F::VicunaOrca => {
            for m in chat {
                match m.role {
                    b"system" if format == F::VicunaOrca => o.put(&[b"SYSTEM: ", m.content, b"\n"]),
                    b"system" => o.put(&[m.content, b"\n\n"]),
                    b"user" => o.put(&[b"USER: ", m.content, b"\n"]),
                    b"assistant" => o.put(&[b"ASSISTANT: ", m.content, b"</s>\n"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("ASSISTANT:");
            }
        }
        F::Deepseek => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[m.content]),
                    b"user" => o.put(&[b"### Instruction:\n", m.content, b"\n"]),
                    b"assistant" => o.put(&[b"### Response:\n", m.content, b"\n<|EOT|>\n"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("### Response:\n");
            }
        }
        F::CommandR => {
            for m in chat {
                let tag: &[u8] = match m.role {
                    b"system" => b"<|SYSTEM_TOKEN|>",
                    b"user" => b"<|USER_TOKEN|>",
                    b"assistant" => b"<|CHATBOT_TOKEN|>",
                    _ => continue,
                };
                o.put(&[
                    b"<|START_OF_TURN_TOKEN|>",
                    tag,
                    trim(m.content),
                    b"<|END_OF_TURN_TOKEN|>",
                ]);
            }
            if add_ass {
                o.s("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
            }
        }
        F::Llama3 => {
            for m in chat {
                o.put(&[
                    b"<|start_header_id|>",
                    m.role,
                    b"<|end_header_id|>\n\n",
                    trim(m.content),
                    b"<|eot_id|>",
                ]);
            }
            if add_ass {
                o.s("<|start_header_id|>assistant<|end_header_id|>\n\n");
            }
        }
        F::ChatGlm3 => {
            o.s("[gMASK]sop");
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n ", m.content]);
            }
            if add_ass {
                o.s("<|assistant|>");
            }
        }
        F::ChatGlm4 => {
            o.s("[gMASK]<sop>");
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n", m.content]);
            }
            if add_ass {
                o.s("<|assistant|>\n");
            }
        }
        F::GlmEdge => {
            for m in chat {
                o.put(&[b"<|", m.role, b"|>\n", m.content]);
            }
            if add_ass {
                o.s("<|assistant|>");
            }
        }
        F::MiniCpm => {
            for m in chat {
                if m.role == b"user" {
                    o.put(&["<用户>".as_bytes(), trim(m.content), b"<AI>"]);
                } else {
                    o.put(&[trim(m.content)]);
                }
            }
        }
        F::Deepseek2 => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[m.content, b"\n\n"]),
                    b"user" => o.put(&[b"User: ", m.content, b"\n\n"]),
                    b"assistant" => o.put(&[b"Assistant: ", m.content, "<｜end▁of▁sentence｜>".as_bytes()]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("Assistant:");
            }
        }
        F::Deepseek3 => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[m.content, b"\n\n"]),
                    b"user" => o.put(&["<｜User｜>".as_bytes(), m.content]),
                    b"assistant" => o.put(&[
                        "<｜Assistant｜>".as_bytes(),
                        m.content,
                        "<｜end▁of▁sentence｜>".as_bytes(),
                    ]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("<｜Assistant｜>");
            }
        }
        F::DeepseekOcr => {
            for m in chat {
                o.put(&[m.content]);
            }
        }
        F::Exaone3 | F::Exaone4 => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[b"[|system|]", trim(m.content), b"[|endofturn|]\n"]),
                    b"user" => o.put(&[b"[|user|]", trim(m.content), b"\n"]),
                    b"assistant" => o.put(&[b"[|assistant|]", trim(m.content), b"[|endofturn|]\n"]),
                    b"tool" if format == F::Exaone4 => o.put(&[b"[|tool|]", trim(m.content), b"[|endofturn|]\n"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("[|assistant|]");
            }
        }
        F::ExaoneMoe => {
            for m in chat {
                if matches!(m.role, b"system" | b"user" | b"assistant" | b"tool") {
                    o.put(&[b"<|", m.role, b"|>\n", trim(m.content), b"<|endofturn|>\n"]);
                }
            }
            if add_ass {
                o.s("<|assistant|>\n");
            }
        }
        F::RwkvWorld => {
            for (i, m) in chat.iter().enumerate() {
                match m.role {
                    b"system" => o.put(&[b"System: ", trim(m.content), b"\n\n"]),
                    b"user" => {
                        o.put(&[b"User: ", trim(m.content), b"\n\n"]);
                        if i + 1 == chat.len() {
                            o.s("Assistant:");
                        }
                    }
                    b"assistant" => o.put(&[b"Assistant: ", trim(m.content), b"\n\n"]),
                    _ => {}
                }
            }
        }
        F::Granite3 => {
            for m in chat {
                o.put(&[b"<|start_of_role|>", m.role, b"<|end_of_role|>"]);
                if m.role == b"assistant_tool_call" {
                    o.s("<|tool_call|>");
                }
                o.put(&[m.content, b"<|end_of_text|>\n"]);
            }
            if add_ass {
                o.s("<|start_of_role|>assistant<|end_of_role|>");
            }
        }
        F::Granite40 | F::Granite41 => {
            for m in chat {
                if m.role == b"assistant_tool_call" {
                    o.s("<|start_of_role|>assistant<|end_of_role|><|tool_call|>");
                } else {
                    o.put(&[b"<|start_of_role|>", m.role, b"<|end_of_role|>"]);
                }
                o.put(&[m.content, b"<|end_of_text|>\n"]);
            }
            if add_ass {
                o.s("<|start_of_role|>assistant<|end_of_role|>");
            }
        }
        F::GigaChat => {
            let has_system = chat.first().is_some_and(|m| m.role == b"system");
            if has_system {
                o.put(&[b"<s>", chat[0].content, b"<|message_sep|>"]);
            } else {
                o.s("<s>");
            }
            for m in &chat[usize::from(has_system)..] {
                match m.role {
                    b"user" => o.put(&[
                        b"user<|role_sep|>",
                        m.content,
                        b"<|message_sep|>available functions<|role_sep|>[]<|message_sep|>",
                    ]),
                    b"assistant" => o.put(&[b"assistant<|role_sep|>", m.content, b"<|message_sep|>"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("assistant<|role_sep|>");
            }
        }
        F::Megrez => {
            for m in chat {
                o.put(&[b"<|role_start|>", m.role, b"<|role_end|>", m.content, b"<|turn_end|>"]);
            }
            if add_ass {
                o.s("<|role_start|>assistant<|role_end|>");
            }
        }
        F::Yandex => {
            for m in chat {
                match m.role {
                    b"user" => o.put(&[" Пользователь: ".as_bytes(), m.content, b"\n\n"]),
                    b"assistant" => o.put(&[" Ассистент: ".as_bytes(), m.content, b"\n\n"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s(" Ассистент:[SEP]");
            }
        }
        F::Bailing | F::BailingThink | F::Bailing2 => {
            let end: &[u8] = if format == F::Bailing2 { b"<|role_end|>" } else { b"" };
            if format == F::Bailing2 && chat.first().is_none_or(|m| m.role != b"system") {
                o.s("<role>SYSTEM</role>detailed thinking off<|role_end|>");
            }
            for m in chat {
                let role = if m.role == b"user" {
                    b"HUMAN".to_vec()
                } else {
                    m.role.to_ascii_uppercase()
                };
                o.put(&[b"<role>", &role, b"</role>", m.content, end]);
            }
            if add_ass {
                o.s("<role>ASSISTANT</role>");
                if format == F::BailingThink {
                    o.s("<think>");
                }
            }
        }
        F::Llama4 => {
            for m in chat {
                o.put(&[
                    b"<|header_start|>",
                    m.role,
                    b"<|header_end|>\n\n",
                    trim(m.content),
                    b"<|eot|>",
                ]);
            }
            if add_ass {
                o.s("<|header_start|>assistant<|header_end|>\n\n");
            }
        }
        F::SmolVlm => {
            o.s("<|im_start|>");
            for m in chat {
                match m.role {
                    b"system" => o.put(&[m.content, b"\n\n"]),
                    b"user" => o.put(&[b"User: ", m.content, b"<end_of_utterance>\n"]),
                    _ => o.put(&[b"Assistant: ", m.content, b"<end_of_utterance>\n"]),
                }
            }
            if add_ass {
                o.s("Assistant:");
            }
        }
        F::Dots1 => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[b"<|system|>", m.content, b"<|endofsystem|>"]),
                    b"user" => o.put(&[b"<|userprompt|>", m.content, b"<|endofuserprompt|>"]),
                    _ => o.put(&[b"<|response|>", m.content, b"<|endofresponse|>"]),
                }
            }
            if add_ass {
                o.s("<|response|>");
            }
        }
        F::HunyuanMoe => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[b"<|startoftext|>", m.content, b"<|extra_4|>"]),
                    b"assistant" => o.put(&[m.content, b"<|eos|>"]),
                    _ => o.put(&[b"<|startoftext|>", m.content, b"<|extra_0|>"]),
                }
            }
        }
        F::OpenAiMoe => {
            for m in chat {
                let end: &[u8] = if m.role == b"assistant" {
                    b"<|return|>"
                } else {
                    b"<|end|>"
                };
                o.put(&[b"<|start|>", m.role, b"<|message|>", m.content, end]);
            }
            if add_ass {
                o.s("<|start|>assistant");
            }
        }
        F::HunyuanDense => {
            for (i, m) in chat.iter().enumerate() {
                if i == 0 && m.role == b"system" {
                    o.put(&[m.content, "<｜hy_place▁holder▁no▁3｜>".as_bytes()]);
                }
                match m.role {
                    b"assistant" => o.put(&[
                        "<｜hy_Assistant｜>".as_bytes(),
                        m.content,
                        "<｜hy_place▁holder▁no▁2｜>".as_bytes(),
                    ]),
                    b"user" => o.put(&["<｜hy_User｜>".as_bytes(), m.content, "<｜hy_Assistant｜>".as_bytes()]),
                    _ => {}
                }
            }
        }
        F::HunyuanVl => {
            o.s("<｜hy_begin▁of▁sentence｜>");
            for (i, m) in chat.iter().enumerate() {
                match m.role {
                    b"system" if i == 0 => o.put(&[m.content, "<｜hy_place▁holder▁no▁3｜>".as_bytes()]),
                    b"user" => o.put(&[m.content, "<｜hy_User｜>".as_bytes()]),
                    b"assistant" => o.put(&[m.content, "<｜hy_Assistant｜>".as_bytes()]),
                    _ => {}
                }
            }
        }
        F::KimiK2 => {
            for m in chat {
                match m.role {
                    b"system" => o.s("<|im_system|>system<|im_middle|>"),
                    b"user" => o.s("<|im_user|>user<|im_middle|>"),
                    b"assistant" => o.s("<|im_assistant|>assistant<|im_middle|>"),
                    b"tool" => o.s("<|im_system|>tool<|im_middle|>"),
                    _ => {}
                }
                o.put(&[m.content, b"<|im_end|>"]);
            }
            if add_ass {
                o.s("<|im_assistant|>assistant<|im_middle|>");
            }
        }
        F::SeedOss => {
            for m in chat {
                let c = if m.role == b"assistant" {
                    trim(m.content)
                } else {
                    m.content
                };
                o.put(&[b"<seed:bos>", m.role, b"\n", c, b"<seed:eos>"]);
            }
            if add_ass {
                o.s("<seed:bos>assistant\n");
            }
        }
        F::Grok2 => {
            for m in chat {
                match m.role {
                    b"system" => o.put(&[b"System: ", trim(m.content), b"<|separator|>\n\n"]),
                    b"user" => o.put(&[b"Human: ", trim(m.content), b"<|separator|>\n\n"]),
                    b"assistant" => o.put(&[b"Assistant: ", m.content, b"<|separator|>\n\n"]),
                    _ => {}
                }
            }
            if add_ass {
                o.s("Assistant:");
            }
        }
        F::PanguEmbed => {
            for (i, m) in chat.iter().enumerate() {
                if i == 0 && m.role != b"system" {
                    o.s("[unused9]系统：[unused10]");
                }
                let label = match m.role {
                    b"system" => "系统",
                    b"user" => "用户",
                    b"assistant" => "助手",
                    b"tool" => "工具",
                    b"function" => "方法",
                    _ => continue,
                };
                o.put(&[
                    b"[unused9]",
                    label.as_bytes(),
                    "：".as_bytes(),
                    m.content,
                    b"[unused10]",
                ]);
            }
            if add_ass {
                o.s("[unused9]助手：");
            }
        }
        F::SolarOpen => {
            for m in chat {
                o.put(&[b"<|begin|>", m.role, b"<|content|>", m.content, b"<|end|>"]);
            }
            if add_ass {
                o.s("<|begin|>assistant");
            }
        }
    }
    o.0
}
