//! `Model`: a GGUF file (or its splits) in memory, its hyper-parameters, vocabulary and weights.
//! Immutable after loading, so one model serves many contexts on many threads.

pub mod ftype;
pub mod hparams;
pub mod lora;
pub mod metadata;
pub mod placement;
pub mod quantize;
pub mod saver;
pub mod spec;
mod storage;
mod user;
mod weights;

#[cfg(test)]
pub(crate) mod tests;

pub use metadata::{KvOverride, OverrideValue};
pub use storage::{FileSource, LoadMode};

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, TensorInfo};
use crate::vocab::Vocab;
use hparams::HParams;
use metadata::Meta;
use spec::{ArchSpec, TensorSpec};
use std::collections::{HashMap, HashSet};
use storage::Storage;
use weights::{FileTensors, Weights};

/// What `llama_model_params` asks of a load, converted and checked by the FFI layer.
pub struct LoadParams<'p> {
    pub mode: LoadMode,
    pub mlock: bool,
    pub vocab_only: bool,
    pub check_tensors: bool,
    /// Let the CPU backend keep matrix weights in faster layouts (a copy; llama.h's `use_extra_bufts`).
    pub extra_bufts: bool,
    pub overrides: Vec<KvOverride>,
    /// The devices and how layers spread over them.
    pub placement: placement::PlacementParams,
    /// Called with the fraction loaded (0..=1); returning false cancels the load.
    pub progress: Option<&'p mut dyn FnMut(f32) -> bool>,
}

impl Default for LoadParams<'_> {
    fn default() -> Self {
        LoadParams {
            mode: LoadMode::Map,
            mlock: false,
            vocab_only: false,
            check_tensors: false,
            extra_bufts: true,
            overrides: Vec::new(),
            placement: placement::PlacementParams::default(),
            progress: None,
        }
    }
}

/// A metadata key and its value as text, each NUL-terminated.
pub type MetaPair = (Vec<u8>, Vec<u8>);

/// The architecture of a `general.architecture` name, or why there is none.
pub type ArchLookup = fn(&str) -> Result<&'static dyn ArchSpec>;

/// The token embedding matrix's name in GGUF files.
const TOKEN_EMBD: &str = "token_embd.weight";

pub struct Model {
    // Field order is drop order: weights reference the storage's bytes.
    weights: Option<Weights>,
    pub vocab: Vocab,
    /// None for a vocab-only load of an architecture the engine cannot run.
    pub arch: Option<&'static dyn ArchSpec>,
    /// None for a vocab-only load.
    pub hparams: Option<HParams>,
    /// Where the layers are (everything on the CPU for a vocab-only load).
    pub placement: placement::Placement,
    /// Non-array metadata as (key, value) text, NUL-terminated, in file order.
    meta: Vec<MetaPair>,
    desc: Vec<u8>,
    ftype: i32,
    t_start_us: i64,
    t_load_us: i64,
    n_params: u64,
    n_bytes: u64,
    /// What `save` writes; None for a vocabulary-only load.
    saving: Option<saver::Saving>,
    files: Vec<Storage>,
    /// The training context training set (0: the file's).
    trained_ctx: std::sync::atomic::AtomicU32,
}

impl Model {
    /// Load a model from one file or from all the splits of one (in order); `arch` finds the
    /// architecture a file names (`arch::spec`).
    pub fn load(paths: &[String], params: LoadParams, arch: ArchLookup) -> Result<Model> {
        let sources: Vec<FileSource> = paths.iter().map(|p| FileSource::Path(p.clone())).collect();
        Model::load_from(&sources, params, arch)
    }

    /// Load a model from files given by path or already open (one, or all splits in order).
    pub fn load_from(sources: &[FileSource], mut params: LoadParams, arch: ArchLookup) -> Result<Model> {
        crate::ggml::init();
        let t_start_us = crate::ggml::time_us();
        if sources.is_empty() {
            return Err(Error::invalid("no model file given"));
        }
        let mut no_progress = |_: f32| true;
        let progress = params.progress.take().unwrap_or(&mut no_progress);
        // Reading (in Read mode) and placing tensors each take half of the progress range.
        let (names, files, ggufs) = open_files(sources, params.mode, &mut |f| progress(0.5 * f))?;
        let read_share = if params.mode == LoadMode::Read { 0.5 } else { 0.0 };
        let opened = Opened {
            names,
            files,
            ggufs,
            from_user: false,
        };
        Model::assemble(opened, &params, arch, t_start_us, (read_share, progress))
    }

    /// A model made as llama.cpp's `llama_model_init_from_user` makes one: `metadata` (the
    /// GGUF header, pairs and tensor infos of the caller's `gguf_context`) gives the
    /// hyper-parameters and, where it lists a tensor, that tensor's type; `fill` is handed each
    /// tensor llama.cpp would create, in its order, to write its data. The weights are read into
    /// memory (`load_mode` none) and never repacked, as llama.cpp forces.
    pub fn from_user(
        metadata: &[u8],
        mut params: LoadParams,
        arch: ArchLookup,
        fill: &mut dyn FnMut(crate::ggml::TensorRef),
    ) -> Result<Model> {
        crate::ggml::init();
        let t_start_us = crate::ggml::time_us();
        params.mode = LoadMode::Read;
        params.extra_bufts = false;
        // The image keeps the caller's pairs; the hyper-parameters see the overrides, as the
        // image's will when it loads.
        let given = GgufFile::parse_metadata(metadata)?;
        let mut g = GgufFile::parse_metadata(metadata)?;
        metadata::apply_overrides(&mut g, &params.overrides)?;
        let m = Meta(&g);
        let mut image = if params.vocab_only {
            user::Image::empty(&given)?
        } else {
            let spec = arch(m.str("general.architecture")?)?;
            let n_vocab = Vocab::from_gguf(&g)?.n_tokens();
            let n_vocab = u32::try_from(n_vocab).map_err(|_| Error::model("vocabulary too large"))?;
            user::Image::plan(&given, spec, &HParams::load(spec, &m, n_vocab)?)?
        };
        image.fill(fill)?;
        let name = "(llama_model_init_from_user)".to_string();
        let gguf = GgufFile::parse(&image.bytes)?;
        let opened = Opened {
            names: vec![name],
            files: vec![Storage::Owned(image.bytes)],
            ggufs: vec![gguf],
            from_user: true,
        };
        let mut no_progress = |_: f32| true;
        let progress = params.progress.take().unwrap_or(&mut no_progress);
        Model::assemble(opened, &params, arch, t_start_us, (0.0, progress))
    }

    /// The model of files opened and parsed; `progress` is the share of the progress range
    /// reading took and the callback.
    fn assemble(
        opened: Opened,
        params: &LoadParams,
        arch: ArchLookup,
        t_start_us: i64,
        (read_share, progress): (f32, &mut dyn FnMut(f32) -> bool),
    ) -> Result<Model> {
        let Opened {
            names,
            files,
            mut ggufs,
            from_user,
        } = opened;
        let meta = metadata::meta_strings(&ggufs[0]);
        metadata::apply_overrides(&mut ggufs[0], &params.overrides)?;
        let m = Meta(&ggufs[0]);
        let arch_name = m.str("general.architecture")?;
        // A vocabulary can be read whatever the architecture; running the model needs one we know.
        let arch = match arch(arch_name) {
            Ok(a) => Some(a),
            Err(_) if params.vocab_only => None,
            Err(e) => return Err(e),
        };
        let vocab = Vocab::from_gguf(&ggufs[0])?;
        let n_vocab = u32::try_from(vocab.n_tokens()).map_err(|_| Error::model("vocabulary too large"))?;

        let tensors = all_tensors(&ggufs)?;
        // llama.cpp counts the tensors of its files: a model made by the caller has none.
        let counted = if from_user { &[][..] } else { &tensors[..] };
        let n_params = counted.iter().map(|(_, t)| t.n_elements()).sum();
        let n_bytes = counted.iter().map(|(_, t)| t.size).sum();
        let ftype = ftype::of(&m, counted.iter().map(|(_, t)| (t.name.clone(), t.ggml_type)))?;

        if params.vocab_only {
            crate::log_info!("model: loaded the vocabulary of a {arch_name} model ({n_vocab} tokens)");
            return Ok(Model {
                weights: None,
                vocab,
                arch,
                hparams: None,
                placement: placement::Placement::cpu_only(0),
                meta,
                desc: format!("{arch_name} ?B {}", ftype::name(ftype)).into_bytes(),
                ftype,
                t_start_us,
                t_load_us: crate::ggml::time_us() - t_start_us,
                n_params,
                n_bytes,
                saving: None,
                files,
                trained_ctx: Default::default(),
            });
        }

        let arch = arch.ok_or_else(|| Error::Internal("architecture checked above".into()))?;
        let hp = HParams::load(arch, &m, n_vocab)?;
        let specs = spec::with_weight_scales(arch.tensors(&hp));
        check_tensors_match(&specs, &tensors)?;
        let shapes: HashMap<&str, &[u64]> = specs.iter().map(|s| (s.name.as_str(), s.shape.as_slice())).collect();
        let saved_tensors = tensors
            .iter()
            .map(|(fi, t)| {
                let shape = shapes.get(t.name.as_str()).copied();
                saver::SavedTensor::new(*fi, ggufs[*fi].data_offset(), t).map(|s| s.as_loaded(shape))
            })
            .collect::<Result<Vec<_>>>()?;
        let blocks = (0..hp.n_layer as usize)
            .map(|il| arch.weights_of_layer(&hp, il))
            .collect();
        let saving = saver::Saving::read(arch, &hp, &m, n_vocab, blocks, saved_tensors)?;
        if params.check_tensors {
            for (fi, t) in &tensors {
                let g = &ggufs[*fi];
                ftype::validate_data(t, files[*fi].bytes(), g.data_offset())?;
            }
            crate::log_info!("model: check_tensors: the data of {} tensors validated", tensors.len());
        }

        let per_file: Vec<FileTensors> = ggufs
            .iter()
            .zip(&files)
            .enumerate()
            .map(|(fi, (g, s))| FileTensors {
                bytes: s.bytes(),
                data_offset: g.data_offset(),
                data_size: g.data_size(),
                tensors: tensors.iter().filter(|(f, _)| *f == fi).map(|(_, t)| *t).collect(),
            })
            .collect();
        let mut place_progress = |f: f32| progress(read_share + (1.0 - read_share) * f);
        let repackable: HashSet<&str> = specs
            .iter()
            .filter(|s| params.extra_bufts && s.matmul_only)
            .map(|s| s.name.as_str())
            .collect();
        crate::ggml::check_ggml_version()?;
        let placement = placement::Placement::new(&params.placement, hp.n_layer as usize)?;
        let device_of = |name: &str| placement.weight_buffer_type(name);
        // A decoder without its own output head multiplies by the token embeddings, which
        // llama.cpp then duplicates into a repacking buffer type or the output layer's device
        // (the lookups keep the original).
        let has_output = tensors.iter().any(|(_, t)| t.name == "output.weight");
        let output_elsewhere = params.extra_bufts || device_of("output.weight")?.is_some();
        let tied =
            (output_elsewhere && arch.facts().has_output_head && !has_output).then_some((TOKEN_EMBD, "output.weight"));
        let weights = Weights::place(&per_file, &repackable, tied, &device_of, &mut place_progress)?;
        if !progress(1.0) {
            return Err(Error::Cancelled(
                "model loading cancelled by the progress callback".into(),
            ));
        }
        if params.mlock {
            for (path, f) in names.iter().zip(&files) {
                if let Err(e) = f.lock() {
                    crate::log_warn!("model: cannot lock '{path}' in memory (mlock): {e}; continuing without");
                }
            }
        }
        let desc = format!("{} {} {}", arch.facts().name, hp.size_label, ftype::name(ftype)).into_bytes();
        crate::log_info!(
            "model: loaded {} ({} tensors, {} parameters, {:.2} MiB)",
            String::from_utf8_lossy(&desc),
            tensors.len(),
            n_params,
            n_bytes as f64 / (1024.0 * 1024.0)
        );
        Ok(Model {
            weights: Some(weights),
            vocab,
            arch: Some(arch),
            hparams: Some(hp),
            placement,
            meta,
            desc,
            ftype,
            t_start_us,
            t_load_us: crate::ggml::time_us() - t_start_us,
            n_params,
            n_bytes,
            saving: Some(saving),
            files,
            trained_ctx: Default::default(),
        })
    }

    /// A model of hyper-parameters and the vocabulary of `g` only: nothing to run or save
    /// (`quantize::model_of_facts`).
    fn of_hparams(arch: &'static dyn ArchSpec, hp: HParams, g: &GgufFile) -> Result<Model> {
        let t_start_us = crate::ggml::time_us();
        let placement = placement::Placement::new(&placement::PlacementParams::default(), hp.n_layer as usize)?;
        Ok(Model {
            weights: None,
            vocab: Vocab::from_gguf(g)?,
            arch: Some(arch),
            desc: format!("{} {} all F32", arch.facts().name, hp.size_label).into_bytes(),
            hparams: Some(hp),
            placement,
            meta: metadata::meta_strings(g),
            ftype: 0,
            t_start_us,
            t_load_us: 0,
            n_params: 0,
            n_bytes: 0,
            saving: None,
            files: Vec::new(),
            trained_ctx: Default::default(),
        })
    }

    /// Writes the model to `path` as llama.cpp's `llama_model_save_to_file` does.
    pub fn save(&self, path: &str) -> Result<()> {
        let (Some(saving), Some(hp)) = (&self.saving, &self.hparams) else {
            return Err(Error::invalid("a vocabulary-only model has no weights to save"));
        };
        let files: Vec<&[u8]> = self.files.iter().map(Storage::bytes).collect();
        let n_ctx_train = self.n_ctx_train().unwrap_or(hp.n_ctx_train);
        saving.write(path, n_ctx_train, &self.vocab, &files)
    }

    /// The training context: the file's, or what training set it to (None: vocab-only).
    pub fn n_ctx_train(&self) -> Option<u32> {
        let hp = self.hparams.as_ref()?;
        match self.trained_ctx.load(std::sync::atomic::Ordering::Relaxed) {
            0 => Some(hp.n_ctx_train),
            n => Some(n),
        }
    }

    /// Training on datapoints of `n` tokens makes that the model's training context, as in
    /// llama.cpp (`llama_model_n_ctx_train` reports it; a saved model records it).
    pub fn set_n_ctx_train(&self, n: u32) {
        self.trained_ctx.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the weights' memory may be written (read into memory, not mapped read-only):
    /// what training needs.
    pub fn weights_writable(&self) -> bool {
        self.files.iter().all(|f| matches!(f, Storage::Owned(_)))
    }

    /// The label of classifier output `i`, NUL-terminated.
    pub fn cls_label(&self, i: usize) -> Option<&[u8]> {
        self.hparams.as_ref()?.cls_labels.get(i).map(Vec::as_slice)
    }

    pub fn weights(&self) -> Option<&Weights> {
        self.weights.as_ref()
    }

    /// How many values the token embedding matrix holds (n_embd per token), if the model has a
    /// vocabulary and the matrix.
    pub fn token_embd_len(&self) -> Option<usize> {
        if self.vocab.n_tokens() == 0 {
            return None;
        }
        let t = self.weights()?.get(TOKEN_EMBD)?;
        Some(t.ne().iter().map(|&n| n as usize).product())
    }

    /// The token embedding matrix as F32 values into `out` (`token_embd_len` of them),
    /// dequantized as llama.cpp dequantizes it.
    pub fn token_embd_f32(&self, out: &mut [f32]) -> Result<()> {
        let t = self
            .weights()
            .and_then(|w| w.get(TOKEN_EMBD))
            .ok_or_else(|| Error::invalid("the model has no token embeddings"))?;
        let mut bytes = vec![0u8; t.nbytes()];
        crate::ggml::tensor_read(t, 0, &mut bytes)?;
        crate::ggml::quant::to_f32(t.ggml_type(), &bytes, out).map_err(Error::from)
    }

    /// Metadata (key, value), each NUL-terminated.
    pub fn meta(&self) -> &[MetaPair] {
        &self.meta
    }

    /// The value of `key` (NUL-terminated), if it is a non-array key of the file.
    pub fn meta_value(&self, key: &[u8]) -> Option<&[u8]> {
        metadata::find_meta(&self.meta, key)
    }

    /// "llama 256M Q4_1".
    pub fn desc(&self) -> &[u8] {
        &self.desc
    }

    /// When loading started and how long it took (ggml clock, microseconds).
    pub fn t_start_us(&self) -> i64 {
        self.t_start_us
    }

    pub fn t_load_us(&self) -> i64 {
        self.t_load_us
    }

    pub fn ftype(&self) -> i32 {
        self.ftype
    }

    pub fn n_params(&self) -> u64 {
        self.n_params
    }

    /// Bytes of all tensors.
    pub fn size(&self) -> u64 {
        self.n_bytes
    }
}

/// Every tensor of every file, tagged with its file index; names must be unique across splits.
/// The files of one model (one, or all its splits in order): their bytes and parsed GGUF
/// headers, checked to be the splits they say they are. `progress` gets the fraction read.
fn open_files(
    sources: &[FileSource],
    mode: LoadMode,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<(Vec<String>, Vec<Storage>, Vec<GgufFile>)> {
    let names: Vec<String> = sources.iter().map(|s| s.name().to_string()).collect();
    let n_files = names.len() as f32;
    let mut files = Vec::with_capacity(names.len());
    for (i, source) in sources.iter().enumerate() {
        let mut read_progress = |f: f32| progress((i as f32 + f) / n_files);
        files.push(Storage::open(source, mode, &mut read_progress)?);
    }
    let mut ggufs = Vec::with_capacity(files.len());
    for (path, storage) in names.iter().zip(&files) {
        let g = GgufFile::parse(storage.bytes()).map_err(|e| match e {
            Error::Gguf { at, msg } => Error::Gguf {
                at,
                msg: format!("{msg} (in '{path}')"),
            },
            other => other,
        })?;
        ggufs.push(g);
    }
    check_splits(&names, &ggufs)?;
    Ok((names, files, ggufs))
}

fn all_tensors(ggufs: &[GgufFile]) -> Result<Vec<(usize, &TensorInfo)>> {
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for (fi, g) in ggufs.iter().enumerate() {
        for t in g.tensors() {
            if let Some(prev) = seen.insert(t.name.as_str(), fi) {
                return Err(Error::model(format!(
                    "tensor '{}' appears in split {prev} and again in split {fi}",
                    t.name
                )));
            }
            out.push((fi, t));
        }
    }
    Ok(out)
}

/// The first file names the split count; each file must carry its own index, in order.
fn check_splits(paths: &[String], ggufs: &[GgufFile]) -> Result<()> {
    let n_split = Meta(&ggufs[0]).u32_opt("split.count")?.unwrap_or(0).max(1) as usize;
    if n_split != ggufs.len() {
        return Err(Error::model(format!(
            "'{}' belongs to a model of {n_split} split files but {} were given",
            paths[0],
            ggufs.len()
        )));
    }
    if n_split > 1 {
        for (i, (g, path)) in ggufs.iter().zip(paths).enumerate() {
            let no = Meta(g).u32("split.no")? as usize;
            if no != i {
                return Err(Error::model(format!("'{path}' is split {no}, expected split {i}")));
            }
        }
    }
    Ok(())
}

/// Every required tensor present with its shape, optional ones right when present, nothing unknown.
fn check_tensors_match(specs: &[TensorSpec], tensors: &[(usize, &TensorInfo)]) -> Result<()> {
    let by_name: HashMap<&str, &TensorInfo> = tensors.iter().map(|(_, t)| (t.name.as_str(), *t)).collect();
    for s in specs {
        let replaced = s.unless.as_ref().is_some_and(|u| by_name.contains_key(u.as_str()));
        match by_name.get(s.name.as_str()) {
            None if s.required && !replaced => {
                return Err(Error::model(format!("missing tensor '{}'", s.name)));
            }
            None => {}
            Some(t) => {
                let last = s.shape.len().saturating_sub(1);
                let fits = |shape: &[u64]| {
                    (0..4).all(|i| {
                        let want = shape.get(i).copied().unwrap_or(1);
                        t.ne[i] == want || (s.more_rows && i == last && t.ne[i] > want)
                    })
                };
                if s.ids && t.ggml_type != crate::ggml::TYPE_I32 {
                    return Err(Error::model(format!(
                        "tensor '{}' is a table of ids: it must be I32, not {}",
                        s.name,
                        crate::ggml::type_name(t.ggml_type)
                    )));
                }
                if !fits(&s.shape) && !s.or_shape.as_deref().is_some_and(fits) {
                    return Err(Error::model(format!(
                        "tensor '{}' has shape {:?} but the hyper-parameters require {:?}",
                        s.name,
                        &t.ne[..t.n_dims as usize],
                        s.shape
                    )));
                }
            }
        }
    }
    let known: std::collections::HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    if let Some((_, t)) = tensors.iter().find(|(_, t)| !known.contains(t.name.as_str())) {
        return Err(Error::model(format!(
            "unexpected tensor '{}' for this architecture",
            t.name
        )));
    }
    Ok(())
}

/// Model files opened and parsed (or a caller's model laid out as one).
struct Opened {
    names: Vec<String>,
    files: Vec<Storage>,
    ggufs: Vec<GgufFile>,
    /// Made by `llama_model_init_from_user`.
    from_user: bool,
}
