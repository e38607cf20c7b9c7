//! Which device holds each layer, as llama.cpp decides it: the offload devices (the client's list,
//! or every RPC server and GPU ggml knows), `split_mode` and `main_gpu`, and `n_gpu_layers` split
//! over them by `tensor_split` or by their free memory. The input layer stays on the CPU; layer
//! `n_layer` stands for the output layer.

use crate::error::{Error, Result};
use crate::ggml::{BufferType, Device, DeviceKind};

/// How layers spread over devices (llama.h's `llama_split_mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SplitMode {
    /// Everything on the main device.
    None,
    /// Whole layers over the devices.
    Layer,
    /// Rows of each matrix over the devices (llama.cpp splits rows on backends that offer a split
    /// buffer type; RPC servers do not, so layers split as in `Layer`).
    Row,
}

/// What `llama_model_params` asks of placement.
#[derive(Clone, Debug)]
pub struct PlacementParams {
    /// The client's devices (`devices`), or None for every offload device ggml knows.
    pub devices: Option<Vec<Device>>,
    pub n_gpu_layers: i32,
    pub split_mode: SplitMode,
    pub main_gpu: i32,
    /// Proportions per device; all zero (or empty) for "by free memory".
    pub tensor_split: Vec<f32>,
    /// `tensor_buft_overrides`: a weight whose name a pattern matches (the first that does) goes
    /// to that buffer type instead of its layer's device.
    pub overrides: Vec<(String, BufferType)>,
}

impl Default for PlacementParams {
    fn default() -> Self {
        PlacementParams {
            devices: None,
            n_gpu_layers: -1,
            split_mode: SplitMode::Layer,
            main_gpu: 0,
            tensor_split: Vec::new(),
            overrides: Vec::new(),
        }
    }
}

/// Where an override sends a weight.
#[derive(Clone, Debug)]
enum Target {
    /// The CPU, in its plain or (if allowed) an extra buffer type, as llama.cpp chooses for an
    /// override to the CPU's buffer type.
    Cpu,
    /// This buffer type (of a device other than the CPU, or a CPU extra one).
    Buffer(BufferType),
}

/// The devices a model uses and the device of each layer (None: the CPU).
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub devices: Vec<Device>,
    /// Per layer, then the output layer last: an index into `devices`.
    layers: Vec<Option<usize>>,
    overrides: Vec<(regex::Regex, Target)>,
}

impl Placement {
    /// Everything on the CPU.
    pub fn cpu_only(n_layer: usize) -> Placement {
        Placement {
            devices: Vec::new(),
            layers: vec![None; n_layer + 1],
            overrides: Vec::new(),
        }
    }

    /// Choose the devices and split `n_layer` layers (plus the output layer) over them.
    pub fn new(params: &PlacementParams, n_layer: usize) -> Result<Placement> {
        let devices = choose_devices(params)?;
        for d in &devices {
            d.check_alive()?;
        }
        // Asked once per device: an RPC server answers over the network.
        let memory: Vec<(usize, usize)> = devices.iter().map(|d| d.memory()).collect();
        let shares = if params.tensor_split.iter().take(devices.len()).any(|&x| x != 0.0) {
            (0..devices.len())
                .map(|i| params.tensor_split.get(i).copied().unwrap_or(0.0))
                .collect()
        } else {
            memory.iter().map(|&m| free_memory(m) as f32).collect::<Vec<_>>()
        };
        let layers = assign_layers(n_layer, params.n_gpu_layers, &split_points(&shares));
        for (d, &(free, _)) in devices.iter().zip(&memory) {
            crate::log_info!(
                "model: using device {} ({}) ({}) - {} MiB free",
                d.name(),
                d.description(),
                d.device_id().unwrap_or_else(|| "unknown id".into()),
                free / 1024 / 1024
            );
        }
        let on_devices = layers.iter().filter(|l| l.is_some()).count();
        if !devices.is_empty() {
            crate::log_info!("model: offloading {on_devices}/{} layers to devices", n_layer + 1);
        }
        let cpu = BufferType::cpu();
        let overrides = params
            .overrides
            .iter()
            .map(|(pattern, buft)| {
                let re = regex::Regex::new(pattern)
                    .map_err(|e| Error::invalid(format!("tensor override pattern '{pattern}': {e}")))?;
                Ok((
                    re,
                    if *buft == cpu {
                        Target::Cpu
                    } else {
                        Target::Buffer(*buft)
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Placement {
            devices,
            layers,
            overrides,
        })
    }

    /// The device of layer `il` (`n_layer` for the output layer), or None for the CPU.
    pub fn layer_device(&self, il: usize) -> Option<Device> {
        self.layers
            .get(il)
            .copied()
            .flatten()
            .and_then(|d| self.devices.get(d).copied())
    }

    /// The buffer type of the device holding weight `name` (a CPU extra one when an override says
    /// so), None for the CPU's choice (the plain layout or a repacked one): the first override
    /// whose pattern occurs in the name decides, else the weight's layer.
    pub fn weight_buffer_type(&self, name: &str) -> Result<Option<BufferType>> {
        match self.overrides.iter().find(|(re, _)| re.is_match(name)) {
            Some((_, Target::Cpu)) => Ok(None),
            Some((_, Target::Buffer(b))) => Ok(Some(*b)),
            None => {
                match weight_layer(name, self.layers.len().saturating_sub(1)).and_then(|il| self.layer_device(il)) {
                    Some(d) => d.buffer_type().map(Some).map_err(Error::from),
                    None => Ok(None),
                }
            }
        }
    }

    /// Buffer type of the device of layer `il` (the CPU's when it has none).
    pub fn layer_buffer_type(&self, il: usize) -> Result<BufferType> {
        match self.layer_device(il) {
            Some(d) => d.buffer_type().map_err(Error::from),
            None => Ok(BufferType::cpu()),
        }
    }

    /// The devices other than the CPU that hold a layer or an overridden weight.
    pub fn used_devices(&self) -> Vec<Device> {
        let mut used: Vec<usize> = self.layers.iter().flatten().copied().collect();
        used.sort_unstable();
        used.dedup();
        let mut out: Vec<Device> = used.into_iter().filter_map(|i| self.devices.get(i).copied()).collect();
        for (_, target) in &self.overrides {
            let dev = match target {
                Target::Buffer(b) => b.device().filter(|d| d.kind() != DeviceKind::Cpu),
                Target::Cpu => None,
            };
            if let Some(d) = dev.filter(|d| !out.contains(d)) {
                out.push(d);
            }
        }
        out
    }
}

/// The layer a weight goes with: a layer's tensors (`blk.N.*`) with layer N, the output head and
/// norm with the output layer (`n_layer`); None for the input layer's and the model's others.
fn weight_layer(name: &str, n_layer: usize) -> Option<usize> {
    if let Some(rest) = name.strip_prefix("blk.") {
        return Some(rest.split('.').next()?.parse::<usize>().ok()?.min(n_layer));
    }
    (name.starts_with("output.") || name.starts_with("output_norm.")).then_some(n_layer)
}

/// A device's free memory from its (free, total), or the host's when it reports none (llama.cpp's
/// fallback).
fn free_memory(memory: (usize, usize)) -> usize {
    match memory {
        (0, 0) => Device::cpu().map(|c| c.memory().0).unwrap_or(0),
        (free, _) => free,
    }
}

/// llama.cpp's default device list: RPC servers first (fewer network transfers), then GPUs (one
/// per hardware id), then integrated GPUs of one backend when there is no discrete GPU; the CPU
/// and accelerators are not offload devices. `split_mode` None keeps only the main device.
fn choose_devices(params: &PlacementParams) -> Result<Vec<Device>> {
    let mut devices = match &params.devices {
        Some(list) => list.clone(),
        None => {
            let (mut rpc, mut gpus, mut igpus) = (Vec::new(), Vec::<Device>::new(), Vec::<Device>::new());
            for d in Device::all() {
                match d.kind() {
                    DeviceKind::Gpu if d.backend_name() == "RPC" => rpc.push(d),
                    DeviceKind::Gpu => {
                        let id = d.device_id();
                        if id.is_none() || !gpus.iter().any(|g| g.device_id() == id) {
                            gpus.push(d);
                        }
                    }
                    DeviceKind::IntegratedGpu if igpus.last().is_none_or(|l| l.backend_name() == d.backend_name()) => {
                        igpus.push(d)
                    }
                    _ => {}
                }
            }
            if gpus.is_empty() {
                gpus = igpus;
            }
            rpc.into_iter().chain(gpus).collect()
        }
    };
    if params.split_mode == SplitMode::None && !devices.is_empty() {
        if params.main_gpu < 0 {
            devices.clear();
        } else {
            let main = devices.get(params.main_gpu as usize).copied().ok_or_else(|| {
                Error::invalid(format!(
                    "invalid value for main_gpu: {} (available devices: {})",
                    params.main_gpu,
                    devices.len()
                ))
            })?;
            devices = vec![main];
        }
    }
    Ok(devices)
}

/// Cumulative shares normalised to end at 1: device i takes the fractions below `points[i]`.
pub fn split_points(shares: &[f32]) -> Vec<f32> {
    let mut sum = 0.0f32;
    let mut points: Vec<f32> = shares
        .iter()
        .map(|s| {
            sum += s;
            sum
        })
        .collect();
    for p in &mut points {
        *p /= sum;
    }
    points
}

/// The device index of each of `n_layer` layers and then the output layer: the last
/// `n_gpu_layers` (all when negative) go to devices, layer `il` to the first device whose split
/// point lies above its fraction of the offloaded layers; the others stay on the CPU.
pub fn assign_layers(n_layer: usize, n_gpu_layers: i32, points: &[f32]) -> Vec<Option<usize>> {
    let all = n_layer + 1;
    let n_gpu = usize::try_from(n_gpu_layers).unwrap_or(all);
    let start = all.saturating_sub(n_gpu);
    let active = if points.is_empty() { 0 } else { n_gpu.min(all) };
    (0..all)
        .map(|il| {
            if il < start || il - start >= active {
                return None;
            }
            let x = (il - start) as f32 / active as f32;
            Some(points.iter().position(|&p| p > x).unwrap_or(points.len() - 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_layers_on_one_device() {
        assert_eq!(assign_layers(3, -1, &[1.0]), vec![Some(0); 4]);
        assert_eq!(assign_layers(3, 99, &[1.0]), vec![Some(0); 4]);
    }

    #[test]
    fn no_devices_keeps_everything_on_the_cpu() {
        assert_eq!(assign_layers(3, -1, &[]), vec![None; 4]);
        assert_eq!(assign_layers(3, 0, &[1.0]), vec![None; 4]);
    }

    #[test]
    fn the_last_layers_are_offloaded_first() {
        // Two of four slots (three layers and the output): layer 2 and the output.
        assert_eq!(assign_layers(3, 2, &[1.0]), vec![None, None, Some(0), Some(0)]);
    }

    #[test]
    fn layers_split_by_shares() {
        let points = split_points(&[1.0, 1.0]);
        assert_eq!(points, vec![0.5, 1.0]);
        // Eight slots: fractions 0, 1/8, ... 7/8; below 0.5 to device 0.
        let got = assign_layers(7, -1, &points);
        assert_eq!(got, [0, 0, 0, 0, 1, 1, 1, 1].map(Some).to_vec());
        let points = split_points(&[3.0, 1.0]);
        let got = assign_layers(3, -1, &points);
        assert_eq!(got, [0, 0, 0, 1].map(Some).to_vec());
    }

    #[test]
    fn weights_go_with_their_layer() {
        assert_eq!(weight_layer("blk.1.attn_q.weight", 4), Some(1));
        assert_eq!(weight_layer("blk.12.ffn_up.weight", 30), Some(12));
        assert_eq!(weight_layer("output.weight", 4), Some(4));
        assert_eq!(weight_layer("output_norm.weight", 4), Some(4));
        assert_eq!(weight_layer("token_embd.weight", 4), None);
        assert_eq!(weight_layer("rope_freqs.weight", 4), None);
        assert_eq!(weight_layer("blk.x.attn_q.weight", 4), None);
    }
}
