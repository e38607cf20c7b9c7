//! Fuzzing entry points: every parser of bytes from outside, reached through the C functions a
//! program hands those bytes to, as it would. `fuzz/` runs each target under libFuzzer
//! (`benches/fuzz.sh`); a test runs each over its seeds and one-field mutations of them. A panic
//! is a crash here even where the boundary would catch it: the documented answer to bad input is
//! an error, never a panic.

use super::adapter::{
    llama_adapter_lora_free, llama_adapter_lora_init, llama_set_adapter_cvec, llama_set_adapters_lora,
};
use super::batch::{llama_batch_get_one, llama_decode};
use super::chat::llama_chat_apply_template;
use super::context::llama_init_from_model;
use super::model::{llama_model_free, llama_model_get_vocab, llama_model_load_from_file};
use super::params::{llama_context_default_params, llama_model_default_params};
use super::sampler::{llama_sampler_apply, llama_sampler_free, llama_sampler_init_grammar};
use super::state::{
    llama_state_get_data, llama_state_get_size, llama_state_load_file, llama_state_save_file, llama_state_seq_get_data,
    llama_state_seq_get_size, llama_state_seq_load_file, llama_state_seq_set_data, llama_state_set_data,
};
use super::types::{
    llama_chat_message, llama_context, llama_model, llama_token, llama_token_data, llama_token_data_array,
};
use super::vocab::{llama_detokenize, llama_token_to_piece, llama_tokenize};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// What a fuzz input is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A model file, loaded with its weights.
    Model,
    /// A model file, loaded for its vocabulary only.
    Vocab,
    /// A whole context's state (`llama_state_set_data`), then a decode.
    State,
    /// One sequence's state (`llama_state_seq_set_data`), then a decode.
    SeqState,
    /// A session file (`llama_state_load_file`, and `llama_state_seq_load_file`), then a decode.
    Session,
    /// A LoRA adapter file, applied to a decode.
    Lora,
    /// A control vector: three `i32`s (width, first and last layer), then floats.
    ControlVector,
    /// A GBNF grammar (then a NUL and its root rule's name), applied to candidates.
    Grammar,
    /// A chat template (then a NUL and a message), applied to a chat.
    ChatTemplate,
    /// A byte choosing a vocabulary, a byte of flags, then text to tokenize and back.
    Tokenize,
}

impl Target {
    pub const ALL: [Target; 10] = [
        Target::Model,
        Target::Vocab,
        Target::State,
        Target::SeqState,
        Target::Session,
        Target::Lora,
        Target::ControlVector,
        Target::Grammar,
        Target::ChatTemplate,
        Target::Tokenize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Model => "model",
            Target::Vocab => "vocab",
            Target::State => "state",
            Target::SeqState => "seq_state",
            Target::Session => "session",
            Target::Lora => "lora",
            Target::ControlVector => "control_vector",
            Target::Grammar => "grammar",
            Target::ChatTemplate => "chat_template",
            Target::Tokenize => "tokenize",
        }
    }

    /// Whether its inputs are GGUF files, which `gguf::mutate` changes a field at a time.
    pub fn is_gguf(self) -> bool {
        matches!(self, Target::Model | Target::Vocab | Target::Lora)
    }
}

/// The model the context targets use: `$ENGINE_FUZZ_MODEL`, else SmolLM2 from the test models'
/// folder (`scripts/fetch-models.sh`).
fn model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ENGINE_FUZZ_MODEL") {
        return PathBuf::from(p);
    }
    let dir = match std::env::var_os("ENGINE_MODEL_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/engine/models"),
    };
    dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// llama.cpp's vocabulary files (`scripts/fetch-ggml.sh`), one per tokenizer kind and more.
fn vocab_paths() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.ggml/vocab"));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/fetch-ggml.sh fetches it)", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    paths.sort();
    paths
}

/// Bytes as a file the C functions can open by path, without touching the disk.
struct MemFile(File);

impl MemFile {
    fn new(data: &[u8]) -> MemFile {
        // SAFETY: a NUL-terminated name and no flags; the result is checked before use.
        let fd = unsafe { libc::memfd_create(c"fuzz".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` is a new descriptor this `File` alone owns.
        let mut f = unsafe { File::from_raw_fd(fd) };
        f.write_all(data).expect("writes the memory file");
        MemFile(f)
    }

    fn path(&self) -> CString {
        CString::new(format!("/proc/self/fd/{}", self.0.as_raw_fd())).expect("no NUL")
    }
}

/// A model and a context over it that has decoded a few tokens, with its states as saved then.
struct Fixture {
    model: *mut llama_model,
    ctx: *mut llama_context,
    state: Vec<u8>,
    seq_state: Vec<u8>,
    session: Vec<u8>,
}

// SAFETY: the handles are used under `FIXTURE`'s lock only, one call at a time.
unsafe impl Send for Fixture {}

impl Fixture {
    fn new() -> Fixture {
        let path = model_path();
        let c_path = CString::new(path.to_string_lossy().into_owned()).expect("no NUL");
        // SAFETY: a NUL-terminated path and default parameters.
        let model = unsafe { llama_model_load_from_file(c_path.as_ptr(), llama_model_default_params()) };
        assert!(
            !model.is_null(),
            "{} does not load (scripts/fetch-models.sh)",
            path.display()
        );
        let mut cp = llama_context_default_params();
        cp.n_ctx = 256;
        cp.n_batch = 64;
        cp.n_ubatch = 64;
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        // SAFETY: a live model and default parameters.
        let ctx = unsafe { llama_init_from_model(model, cp) };
        assert!(!ctx.is_null(), "no context for the fuzz model");
        let mut f = Fixture {
            model,
            ctx,
            state: Vec::new(),
            seq_state: Vec::new(),
            session: Vec::new(),
        };
        assert_eq!(f.decode(&[1, 2, 3, 4]), 0, "the fuzz model decodes");
        // SAFETY: a live context; each buffer is as large as the size asked just before.
        unsafe {
            f.state = vec![0; llama_state_get_size(ctx)];
            llama_state_get_data(ctx, f.state.as_mut_ptr(), f.state.len());
            f.seq_state = vec![0; llama_state_seq_get_size(ctx, 0)];
            llama_state_seq_get_data(ctx, f.seq_state.as_mut_ptr(), f.seq_state.len(), 0);
        }
        let dir = std::env::temp_dir().join(format!("engine-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let file = dir.join("session");
        let c_file = CString::new(file.to_string_lossy().into_owned()).expect("no NUL");
        let tokens: [llama_token; 4] = [1, 2, 3, 4];
        // SAFETY: a live context, a NUL-terminated path and 4 tokens.
        let saved = unsafe { llama_state_save_file(ctx, c_file.as_ptr(), tokens.as_ptr(), tokens.len()) };
        assert!(saved, "the fuzz context saves a session");
        f.session = std::fs::read(&file).expect("reads the session back");
        let _ = std::fs::remove_dir_all(&dir);
        f
    }

    fn decode(&mut self, tokens: &[llama_token]) -> i32 {
        let mut tokens = tokens.to_vec();
        // SAFETY: a live context and a batch over `tokens`, alive for the call.
        unsafe { llama_decode(self.ctx, llama_batch_get_one(tokens.as_mut_ptr(), tokens.len() as i32)) }
    }

    /// The state of after `new`, whatever an input left.
    fn restore(&mut self) {
        // SAFETY: a live context and its own saved state.
        let read = unsafe { llama_state_set_data(self.ctx, self.state.as_ptr(), self.state.len()) };
        assert_eq!(read, self.state.len(), "the fixture's own state reads back");
    }
}

static FIXTURE: Mutex<Option<Fixture>> = Mutex::new(None);

/// Runs `f` on the fixture (made on first use), then puts its state back.
fn with_fixture<T>(f: impl FnOnce(&mut Fixture) -> T) -> T {
    let mut guard = FIXTURE.lock().unwrap_or_else(|e| e.into_inner());
    let fx = guard.get_or_insert_with(Fixture::new);
    let out = f(fx);
    fx.restore();
    out
}

/// Log lines are the inputs' errors: many, and expected.
fn quiet() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| crate::log::set_sink(Some(Arc::new(|_, _| {}))));
}

/// Before a target's first input: quiet logs; with `$ENGINE_FUZZ_SEEDS_TO` set, write its seeds
/// into that folder and exit (how `benches/fuzz.sh` starts each corpus).
pub fn init(target: Target) {
    quiet();
    if let Some(dir) = std::env::var_os("ENGINE_FUZZ_SEEDS_TO") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("the seeds' folder");
        for (i, s) in seeds(target).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).expect("writes a seed");
        }
        std::process::exit(0);
    }
}

/// libFuzzer's custom mutation for GGUF inputs: `data[..size]` changed one field at a time
/// (`gguf::mutate`), cut to `max_size`; returns the new size.
pub fn mutate_into(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let m = crate::gguf::mutate::mutate(&data[..size], &mut crate::gguf::mutate::Rng::new(u64::from(seed)));
    let n = m.len().min(max_size).min(data.len());
    data[..n].copy_from_slice(&m[..n]);
    n
}

/// Runs one input and tells whether the engine took it (and, for the context targets, decoded
/// after it); panics (a crash to the fuzzer) where the engine panicked, also where the boundary
/// caught it.
pub fn run(target: Target, data: &[u8]) -> bool {
    quiet();
    let taken = match target {
        Target::Model | Target::Vocab => load_model(data, target == Target::Vocab),
        Target::State => with_fixture(|fx| {
            // SAFETY: a live context and `data` for its length.
            let read = unsafe { llama_state_set_data(fx.ctx, data.as_ptr(), data.len()) };
            read > 0 && fx.decode(&[5]) == 0
        }),
        Target::SeqState => with_fixture(|fx| {
            // SAFETY: a live context and `data` for its length.
            let read = unsafe { llama_state_seq_set_data(fx.ctx, data.as_ptr(), data.len(), 0) };
            read > 0 && fx.decode(&[5]) == 0
        }),
        Target::Session => with_fixture(|fx| {
            let file = MemFile::new(data);
            let mut tokens = [0 as llama_token; 64];
            let mut n = 0usize;
            // SAFETY: a live context, a NUL-terminated path, room for 64 tokens and a count.
            let loaded =
                unsafe { llama_state_load_file(fx.ctx, file.path().as_ptr(), tokens.as_mut_ptr(), 64, &mut n) };
            let whole = loaded && fx.decode(&[5]) == 0;
            // SAFETY: as above, for sequence 0.
            let read =
                unsafe { llama_state_seq_load_file(fx.ctx, file.path().as_ptr(), 0, tokens.as_mut_ptr(), 64, &mut n) };
            whole || (read > 0 && fx.decode(&[5]) == 0)
        }),
        Target::Lora => with_fixture(|fx| {
            let file = MemFile::new(data);
            // SAFETY: a live model and a NUL-terminated path.
            let adapter = unsafe { llama_adapter_lora_init(fx.model, file.path().as_ptr()) };
            if adapter.is_null() {
                return false;
            }
            let (mut list, mut scale) = ([adapter], [1.0f32]);
            // SAFETY: a live context, one adapter of its model and one scale.
            let set = unsafe { llama_set_adapters_lora(fx.ctx, list.as_mut_ptr(), 1, scale.as_mut_ptr()) } == 0;
            let decoded = set && fx.decode(&[5]) == 0;
            // SAFETY: no adapters for the live context, then the adapter freed once.
            unsafe {
                llama_set_adapters_lora(fx.ctx, std::ptr::null_mut(), 0, std::ptr::null_mut());
                llama_adapter_lora_free(adapter);
            }
            decoded
        }),
        Target::ControlVector => with_fixture(|fx| {
            let int = |i: usize| i32::from_le_bytes(std::array::from_fn(|k| data.get(4 * i + k).copied().unwrap_or(0)));
            let floats: Vec<f32> = data
                .get(12..)
                .unwrap_or_default()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            // SAFETY: a live context and `floats` for its length.
            let set = unsafe { llama_set_adapter_cvec(fx.ctx, floats.as_ptr(), floats.len(), int(0), int(1), int(2)) };
            let decoded = set == 0 && fx.decode(&[5]) == 0;
            // SAFETY: a live context; NULL data clears the vector.
            unsafe { llama_set_adapter_cvec(fx.ctx, std::ptr::null(), 0, 0, 0, 0) };
            decoded
        }),
        Target::Grammar => with_fixture(|fx| grammar(fx, data)),
        Target::ChatTemplate => chat_template(data),
        Target::Tokenize => tokenize(data),
    };
    if let Some(p) = super::entry::take_caught_panic() {
        panic!("{}: the boundary caught a panic: {p}", target.name());
    }
    taken
}

fn load_model(data: &[u8], vocab_only: bool) -> bool {
    let file = MemFile::new(data);
    let mut params = llama_model_default_params();
    params.vocab_only = vocab_only;
    // SAFETY: a NUL-terminated path and default parameters.
    let model = unsafe { llama_model_load_from_file(file.path().as_ptr(), params) };
    if model.is_null() {
        return false;
    }
    // SAFETY: the model just loaded, freed once.
    unsafe { llama_model_free(model) };
    true
}

/// Splits `data` at its first NUL: what comes before (NUL-terminated) and after.
fn split_nul(data: &[u8]) -> (CString, &[u8]) {
    let at = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let head = CString::new(&data[..at]).expect("no NUL before the first");
    (head, data.get(at + 1..).unwrap_or_default())
}

fn grammar(fx: &mut Fixture, data: &[u8]) -> bool {
    let (text, rest) = split_nul(data);
    let root = match rest {
        [] => c"root".to_owned(),
        r => split_nul(r).0,
    };
    // SAFETY: a live model.
    let vocab = unsafe { llama_model_get_vocab(fx.model) };
    // SAFETY: a live vocabulary and NUL-terminated strings.
    let smpl = unsafe { llama_sampler_init_grammar(vocab, text.as_ptr(), root.as_ptr()) };
    if smpl.is_null() {
        return false;
    }
    let mut cands: Vec<llama_token_data> = (0..512)
        .map(|id| llama_token_data {
            id,
            logit: (id % 7) as f32,
            p: 0.0,
        })
        .collect();
    let mut arr = llama_token_data_array {
        data: cands.as_mut_ptr(),
        size: cands.len(),
        selected: -1,
        sorted: false,
    };
    // SAFETY: a live sampler and an array over `cands`, alive for the call; then freed once.
    unsafe {
        llama_sampler_apply(smpl, &mut arr);
        llama_sampler_free(smpl);
    }
    true
}

fn chat_template(data: &[u8]) -> bool {
    let (tmpl, rest) = split_nul(data);
    let content =
        CString::new(rest.iter().map(|&b| if b == 0 { b' ' } else { b }).collect::<Vec<u8>>()).expect("NULs replaced");
    let msgs = [
        llama_chat_message {
            role: c"system".as_ptr(),
            content: c"Be brief.".as_ptr(),
        },
        llama_chat_message {
            role: c"user".as_ptr(),
            content: content.as_ptr(),
        },
        llama_chat_message {
            role: c"assistant".as_ptr(),
            content: c"Hi.".as_ptr(),
        },
    ];
    let mut buf = vec![0u8; 256];
    for _ in 0..2 {
        // SAFETY: a NUL-terminated template, three messages of NUL-terminated strings, and
        // `buf` for its length.
        let n = unsafe {
            llama_chat_apply_template(
                tmpl.as_ptr(),
                msgs.as_ptr(),
                msgs.len(),
                true,
                buf.as_mut_ptr().cast(),
                buf.len() as i32,
            )
        };
        if n <= buf.len() as i32 {
            return n >= 0;
        }
        buf.resize(n as usize, 0);
    }
    true
}

/// llama.cpp's vocabulary files, each loaded once, vocabulary only.
fn vocab_models() -> &'static [usize] {
    static MODELS: OnceLock<Vec<usize>> = OnceLock::new();
    MODELS.get_or_init(|| {
        vocab_paths()
            .into_iter()
            .filter_map(|p| {
                let c = CString::new(p.to_string_lossy().into_owned()).ok()?;
                let mut params = llama_model_default_params();
                params.vocab_only = true;
                // SAFETY: a NUL-terminated path and valid parameters.
                let m = unsafe { llama_model_load_from_file(c.as_ptr(), params) };
                (!m.is_null()).then_some(m as usize)
            })
            .collect()
    })
}

fn tokenize(data: &[u8]) -> bool {
    let [pick, flags, text @ ..] = data else {
        return false;
    };
    let models = vocab_models();
    assert!(!models.is_empty(), "no vocabulary loads");
    let model = models[*pick as usize % models.len()] as *const llama_model;
    // SAFETY: a model loaded above and never freed.
    let vocab = unsafe { llama_model_get_vocab(model) };
    let bit = |i: u8| flags & (1 << i) != 0;
    let into = |tokens: &mut [llama_token]| {
        // SAFETY: a live vocabulary, `text` and `tokens` for their lengths.
        unsafe {
            llama_tokenize(
                vocab,
                text.as_ptr().cast(),
                text.len() as i32,
                tokens.as_mut_ptr(),
                tokens.len() as i32,
                bit(0),
                bit(1),
            )
        }
    };
    let mut tokens = vec![0 as llama_token; text.len() + 8];
    let mut n = into(&mut tokens);
    if n < 0 {
        // Room for the count it asked for.
        tokens.resize(n.unsigned_abs() as usize, 0);
        n = into(&mut tokens);
    }
    let tokens = &tokens[..n.max(0) as usize];
    let mut out = vec![0u8; 4 * text.len() + 64];
    // SAFETY: a live vocabulary, `tokens` and `out` for their lengths.
    unsafe {
        llama_detokenize(
            vocab,
            tokens.as_ptr(),
            tokens.len() as i32,
            out.as_mut_ptr().cast(),
            out.len() as i32,
            bit(2),
            bit(3),
        );
    }
    let mut piece = [0u8; 64];
    for &t in tokens {
        // SAFETY: a live vocabulary and `piece` for its length.
        unsafe { llama_token_to_piece(vocab, t, piece.as_mut_ptr().cast(), piece.len() as i32, 0, bit(4)) };
    }
    n >= 0
}

/// Inputs to start each target from: the files the tests use, the fixture's own states, and
/// small examples.
pub fn seeds(target: Target) -> Vec<Vec<u8>> {
    let read = |p: &std::path::Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    match target {
        Target::Model | Target::Vocab => vocab_paths().iter().map(|p| read(p)).collect(),
        Target::State | Target::SeqState | Target::Session => {
            let mut guard = FIXTURE.lock().unwrap_or_else(|e| e.into_inner());
            let fx = guard.get_or_insert_with(Fixture::new);
            vec![match target {
                Target::State => fx.state.clone(),
                Target::SeqState => fx.seq_state.clone(),
                _ => fx.session.clone(),
            }]
        }
        Target::Lora => vec![lora_seed()],
        Target::ControlVector => {
            // SmolLM2's width (576), layers 1 to 2, then one vector per layer.
            let mut v: Vec<u8> = [576i32, 1, 2].iter().flat_map(|i| i.to_le_bytes()).collect();
            v.extend((0..576 * 30).flat_map(|i| (i as f32 * 1e-3).to_le_bytes()));
            vec![v]
        }
        Target::Grammar => [
            "root ::= \"yes\" | \"no\"",
            "root ::= [a-z]+ (\" \" [0-9]{1,3})*",
            "root ::= obj\nobj ::= \"{\" ws (str \":\" ws val)? \"}\"\nstr ::= \"\\\"\" [^\"]* \"\\\"\"\nval ::= str | [0-9]+\nws ::= [ \\t\\n]*",
            "root ::= <[1000]> !<[2]> x\nx ::= \"a\"?",
        ]
        .iter()
        .map(|g| g.as_bytes().to_vec())
        .collect(),
        Target::ChatTemplate => {
            let mut v: Vec<Vec<u8>> = ["chatml", "llama3", "gemma", "mistral-v7", "deepseek3"]
                .iter()
                .map(|t| format!("{t}\0Hello there").into_bytes())
                .collect();
            // A Jinja template, told by its markers.
            v.push(b"{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}\0Hi".to_vec());
            v
        }
        Target::Tokenize => (0u8..8)
            .map(|i| {
                let mut v = vec![i * 7, i];
                v.extend_from_slice("Hello world! <s> 123 \u{00e9}\u{4e16}\u{754c} \n\t  ".as_bytes());
                v
            })
            .collect(),
    }
}

/// A LoRA adapter for SmolLM2's first query projection: rank 4, F32, alpha 8.
fn lora_seed() -> Vec<u8> {
    use crate::gguf::{padded, MetaWriter, TensorEntry, Value};
    let mut w = MetaWriter::default();
    w.set("general.architecture", Value::Str(b"llama".to_vec()));
    w.set("general.type", Value::Str(b"adapter".to_vec()));
    w.set("adapter.type", Value::Str(b"lora".to_vec()));
    w.set("adapter.lora.alpha", Value::F32(8.0));
    let (e, r) = (576u64, 4u64);
    for (name, ne) in [
        ("blk.0.attn_q.weight.lora_a", [e, r, 1, 1]),
        ("blk.0.attn_q.weight.lora_b", [r, e, 1, 1]),
    ] {
        w.add_tensor(TensorEntry {
            name: name.into(),
            ne,
            ggml_type: 0,
        })
        .expect("adds");
    }
    let mut bytes = w.encode().expect("writes");
    for _ in 0..2 {
        let data: Vec<u8> = (0..e * r)
            .flat_map(|i| ((i % 13) as f32 * 1e-3).to_le_bytes())
            .collect();
        let len = data.len() as u64;
        bytes.extend(data);
        bytes.resize(bytes.len() + (padded(len) - len) as usize, 0);
    }
    bytes
}

/// `data` with one byte-level change: a bit flipped, a byte set to an edge value, a run cut out
/// or repeated, or the end cut off.
pub fn mutate_bytes(data: &[u8], rng: &mut crate::gguf::mutate::Rng) -> Vec<u8> {
    let mut out = data.to_vec();
    if out.is_empty() {
        out.push(rng.next_u64() as u8);
        return out;
    }
    let i = rng.below(out.len());
    match rng.below(5) {
        0 => out[i] ^= 1 << rng.below(8),
        1 => out[i] = [0u8, 0xff, 0x7f, 0x80, b'"', b'{', b'\\'][rng.below(7)],
        2 => {
            let end = (i + 1 + rng.below(16)).min(out.len());
            out.drain(i..end);
        }
        3 => {
            let end = (i + 1 + rng.below(16)).min(out.len());
            let run = out[i..end].to_vec();
            out.splice(i..i, run);
        }
        _ => out.truncate(i),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::mutate::{mutate, Rng};
    use std::time::{Duration, Instant};

    /// Each target over its seeds, then over mutations of them for a moment: no input panics.
    /// (`benches/fuzz.sh` runs the same targets under libFuzzer for as long as it is given.)
    #[test]
    fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
        let budget = Duration::from_millis(1500);
        for target in Target::ALL {
            let mut seeds = seeds(target);
            // A whole load of a vocabulary file fails (it has no weights): the generated models
            // are the whole target's seeds that must load.
            if target == Target::Model {
                seeds.extend(small_generated_models());
            }
            assert!(!seeds.is_empty(), "{} has seeds", target.name());
            for (i, s) in seeds.iter().enumerate() {
                let must_take = target != Target::Model || i >= vocab_paths().len();
                assert!(run(target, s) || !must_take, "{}: seed {i} was refused", target.name());
            }
            let mut rng = Rng::new(0x5eed ^ target as u64);
            let (start, mut runs, mut refused) = (Instant::now(), 0, 0);
            while start.elapsed() < budget {
                let seed = &seeds[rng.below(seeds.len())];
                let input = match target.is_gguf() {
                    true => mutate(seed, &mut rng),
                    false => mutate_bytes(seed, &mut rng),
                };
                refused += usize::from(!run(target, &input));
                runs += 1;
            }
            // Mutants reach the checks: some are refused (a target that took everything would
            // not be reading its input). A control vector's floats are most of it and any count
            // of them is taken: its width is what gets checked.
            match target {
                Target::ControlVector => {
                    let mut narrow = seeds[0].clone();
                    narrow[..4].copy_from_slice(&575i32.to_le_bytes());
                    assert!(!run(target, &narrow), "control_vector: a width of 575 was taken");
                }
                _ => assert!(refused > 0, "{}: none of {runs} mutations was refused", target.name()),
            }
        }
    }

    /// A few of the generated test models (the smallest), as seeds of whole loads.
    fn small_generated_models() -> Vec<Vec<u8>> {
        let mut files: Vec<(u64, PathBuf)> = crate::arch::tests::generated_models()
            .into_iter()
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.len(), p)))
            .collect();
        files.sort();
        files
            .into_iter()
            .take(6)
            .map(|(_, p)| std::fs::read(p).expect("reads a generated model"))
            .collect()
    }
}
