//! Process-wide logging. Engine code logs through the macros below; where the lines go is decided
//! by the installed sink (stderr by default, a C callback once `llama_log_set` was called).

use parking_lot::RwLock;
use std::sync::Arc;

/// Levels with ggml's numbering (`enum ggml_log_level`), so they pass through to C unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
    /// Continuation of the previous line (ggml uses it for progress dots).
    Cont = 5,
}

impl Level {
    pub fn from_ggml(v: u32) -> Level {
        match v {
            1 => Level::Debug,
            2 => Level::Info,
            3 => Level::Warn,
            5 => Level::Cont,
            _ => Level::Error,
        }
    }
}

/// Receives every finished log line (text ends with a newline).
pub type Sink = Arc<dyn Fn(Level, &str) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Replace the sink; `None` restores the default (stderr, INFO and above).
pub fn set_sink(sink: Option<Sink>) {
    *SINK.write() = sink;
}

/// The lowest level the default sink prints; `ENGINE_LOG_LEVEL=debug|info|warn|error` changes it.
fn default_threshold() -> Level {
    match std::env::var("ENGINE_LOG_LEVEL").as_deref() {
        Ok("debug") => Level::Debug,
        Ok("warn") => Level::Warn,
        Ok("error") => Level::Error,
        _ => Level::Info,
    }
}

pub fn default_sink(level: Level, text: &str) {
    use std::io::Write;
    if level == Level::Cont || level >= default_threshold() {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
}

/// Emit one line. The sink is cloned out of the lock so a callback may itself call `llama_log_set`.
pub fn emit(level: Level, text: &str) {
    let sink = SINK.read().clone();
    match sink {
        Some(s) => s(level, text),
        None => default_sink(level, text),
    }
}

pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    let mut line = std::fmt::format(args);
    if !line.ends_with('\n') {
        line.push('\n');
    }
    emit(level, &line);
}

#[macro_export]
macro_rules! log_error { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Error, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_warn { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Warn, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_info { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Info, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_debug { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Debug, format_args!($($t)*)) } }

/// Tests that install a sink hold this, since the sink is process-wide and tests run in parallel.
#[cfg(test)]
pub(crate) static TEST_SINK_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn lines_reach_the_installed_sink_with_a_newline() {
        let _sink = TEST_SINK_LOCK.lock();
        let seen: Arc<Mutex<Vec<(Level, String)>>> = Arc::default();
        let s = seen.clone();
        set_sink(Some(Arc::new(move |l, t| s.lock().push((l, t.to_string())))));
        crate::log_warn!("abc {}", 1);
        set_sink(None);
        let got = seen.lock().clone();
        assert!(got.contains(&(Level::Warn, "abc 1\n".to_string())));
    }
}
