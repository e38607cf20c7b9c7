//! Builds ggml's shared libraries, generates `include/llama.h` from `src/ffi/` (only: engine
//! internals stay out of the header) with cbindgen, compiles the library's one C++ file
//! (`src/ffi/cxx_abi.cpp`, see `src/ffi/llama_ext.rs`) and sets the SONAME.
//!
//! The header is always written to `$OUT_DIR/llama.h`. Outside CI it is also copied to
//! `include/llama.h` when it changed, so a developer's build keeps the committed header current; in
//! CI (`CI` set) the committed file is left alone and a test compares the two, failing on drift.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=GGML_SRC");
    println!("cargo:rerun-if-env-changed=ENGINE_CMAKE");
    println!("cargo:rerun-if-env-changed=ENGINE_CPU_VARIANTS");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libengine.so.0");

    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    // The ggml tree whose headers qts_ggml_sys binds (GGML_SRC, set by .cargo/config.toml).
    let ggml = PathBuf::from(std::env::var("GGML_SRC").expect("GGML_SRC (see vendor/README.md)"));
    println!("cargo:rustc-env=ENGINE_GGML_VERSION={}", ggml_version(&ggml));
    // Miri interprets the pure-Rust parts and links nothing: ggml is not built for it.
    if std::env::var_os("CARGO_CFG_MIRI").is_none() {
        build_shared_ggml(&ggml);
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file(root.join("src/ffi/cxx_abi.cpp"))
        .include(ggml.join("include"))
        .warnings_into_errors(true)
        .compile("engine_cxx");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let header = cbindgen::Builder::new()
        .with_src(root.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate llama.h");
    header.write_to_file(out.join("llama.h"));

    if std::env::var_os("CI").is_none() {
        let generated = std::fs::read(out.join("llama.h")).expect("generated header");
        let committed = root.join("include").join("llama.h");
        if std::fs::read(&committed).ok().as_deref() != Some(&generated[..]) {
            std::fs::create_dir_all(root.join("include")).expect("include/");
            std::fs::write(&committed, generated).expect("write include/llama.h");
        }
    }
}

/// ggml as the shared libraries llama.cpp installs (`libggml.so.0`, `libggml-base.so.0`,
/// `libggml-cpu.so.0`, `libggml-rpc.so.0`, ...), built from `src` with llama.cpp's options, so that
/// a process holds one ggml: put in place of libllama.so, libengine.so uses the ggml already loaded
/// under those sonames, and the client's devices and buffer types are ours (vendor/README.md).
/// The libraries are copied beside libengine.so, which finds them through its `$ORIGIN` run path.
fn build_shared_ggml(src: &std::path::Path) {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/engine-<hash>/out; libengine.so is in <target>/<profile>.
    let profile_dir = out.ancestors().nth(3).expect("OUT_DIR under the target directory");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let on_off = |b: bool| if b { "ON" } else { "OFF" };
    let cmake = std::env::var("ENGINE_CMAKE").unwrap_or_else(|_| "cmake".to_string());
    let portable = feature("PORTABLE");
    let native = feature("NATIVE") && !portable;
    let options = [
        "-DCMAKE_BUILD_TYPE=Release".to_string(),
        "-DBUILD_SHARED_LIBS=ON".to_string(),
        "-DGGML_BUILD_TESTS=OFF".to_string(),
        "-DGGML_BUILD_EXAMPLES=OFF".to_string(),
        "-DGGML_CCACHE=OFF".to_string(),
        // llamafile's tiled matrix kernels: llama.cpp's build has them, and its numbers with them.
        "-DGGML_LLAMAFILE=ON".to_string(),
        "-DGGML_RPC=ON".to_string(),
        format!("-DGGML_NATIVE={}", on_off(native)),
        // The portable build: every CPU variant as a module, the best one loaded at run time.
        format!("-DGGML_BACKEND_DL={}", on_off(portable)),
        format!("-DGGML_CPU_ALL_VARIANTS={}", on_off(portable)),
        format!("-DCMAKE_C_FLAGS={NO_AMX}"),
        format!("-DCMAKE_CXX_FLAGS={NO_AMX}"),
        format!("-DGGML_CUDA={}", on_off(feature("CUDA"))),
        format!("-DGGML_BLAS={}", on_off(feature("BLAS"))),
        // The libraries find each other beside themselves wherever they are copied.
        "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON".to_string(),
        "-DCMAKE_INSTALL_RPATH=$ORIGIN".to_string(),
    ];
    // One ggml build per source and options, shared by the build scripts that want the same one:
    // clippy's run of this script is another run than the build's (cargo keys it by the compiler
    // wrapper), and would otherwise build ggml a second time.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&cmake, src, &options).hash(&mut h);
        h.finish()
    };
    let shared = profile_dir.join(format!("ggml-{key:016x}"));
    // What lands beside libengine.so: from a previous build's cache entry, or built now.
    let cache = ggml_cache_entry(&cmake, src, &options, native);
    let files = match &cache {
        Some(entry) if entry.join("complete").exists() => entry.join("files"),
        _ => {
            let built = build_ggml(&cmake, src, &options, portable, &shared);
            match &cache {
                Some(entry) => store_in_cache(&built, entry),
                None => built,
            }
        }
    };
    println!("cargo:rustc-link-search=native={}", files.display());
    // What libllama.so links: the CPU backend is reached through ggml's registry. By file name:
    // `-lggml` would take the first directory that has libggml.so or libggml.a, and cargo orders
    // the directories by name, so qts_ggml_sys's empty archives (vendor/README.md) may come first.
    for name in ["ggml", "ggml-base"] {
        println!("cargo:rustc-link-lib=dylib:+verbatim=lib{name}.so");
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");

    // A build of the other kind (native or portable) may have left its libraries here.
    for entry in std::fs::read_dir(profile_dir).expect("the profile directory") {
        let path = entry.expect("directory entry").path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libggml"))
        {
            let _ = std::fs::remove_file(&path);
        }
    }
    copy_libraries(&files, profile_dir);
}

/// Builds ggml with `options` in `shared`, and returns a directory holding its libraries (and the
/// backend modules a portable build makes) only.
fn build_ggml(
    cmake: &str,
    src: &std::path::Path,
    options: &[String],
    portable: bool,
    shared: &std::path::Path,
) -> PathBuf {
    use std::process::Command;
    let build = shared.join("build");
    let lib = shared.join("lib");
    let run = |cmd: &mut Command, what: &str| {
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("{what}: cannot run {cmake}: {e}"));
        assert!(status.success(), "{what} failed ({status})");
    };
    let mut configure = Command::new(cmake);
    if portable {
        // Makefiles, for their `TARGET/fast` (portable_build_steps).
        configure.args(["-G", "Unix Makefiles"]);
    }
    run(
        configure
            .arg("-S")
            .arg(src)
            .arg("-B")
            .arg(&build)
            .args(options)
            .arg(format!("-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={}", lib.display()))
            .stdout(std::process::Stdio::null()),
        "configuring ggml",
    );
    let jobs = std::env::var("NUM_JOBS").unwrap_or_else(|_| "1".to_string());
    // ggml, as a top-level project, writes the backends it builds as modules (GGML_BACKEND_DL) to
    // bin/ of its build directory.
    let modules = build.join("bin");
    let steps = if portable {
        // Only the variants asked for this time end up beside libengine.so.
        for entry in std::fs::read_dir(&modules).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        portable_build_steps(cmake, &build)
    } else {
        vec![vec![]]
    };
    for targets in steps {
        let mut build_cmd = Command::new(cmake);
        build_cmd.arg("--build").arg(&build).arg("--parallel").arg(&jobs);
        if !targets.is_empty() {
            build_cmd.arg("--target").args(targets);
        }
        run(build_cmd.stdout(std::process::Stdio::null()), "building ggml");
    }
    let files = shared.join("files");
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir_all(&files).expect("ggml's file directory");
    copy_libraries(&lib, &files);
    copy_libraries(&modules, &files);
    files
}

/// Copies the libggml shared objects in `from` (symbolic links as links) into `to`.
fn copy_libraries(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).into_iter().flatten() {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        if !name.starts_with("libggml") || !name.contains(".so") {
            continue;
        }
        let dest = to.join(&name);
        let _ = std::fs::remove_file(&dest);
        if path.is_symlink() {
            let target = std::fs::read_link(&path).expect("symlink");
            std::os::unix::fs::symlink(target, &dest).expect("symlink ggml library");
        } else {
            std::fs::copy(&path, &dest).expect("copy ggml library");
        }
    }
}

/// With `ENGINE_GGML_CACHE` set (scripts/test.sh sets it), ggml's libraries are kept in a directory
/// of it named by everything their build reads: ggml's source (by content), the options, cmake and
/// the compilers (by their versions and the variables that pick and flag them), and, for a build
/// for this CPU (`-march=native`), the CPU (scripts/cpu-key.sh). A fresh clone then links the ggml
/// an earlier one built, as the test suite's llama.cpp oracle is kept, instead of compiling it again.
fn ggml_cache_entry(cmake: &str, src: &std::path::Path, options: &[String], native: bool) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    use std::process::Command;
    println!("cargo:rerun-if-env-changed=ENGINE_GGML_CACHE");
    let root = PathBuf::from(std::env::var_os("ENGINE_GGML_CACHE")?);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    options.hash(&mut h);
    hash_tree(src, &mut h);
    let output = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default()
    };
    output(cmake, &["--version"]).hash(&mut h);
    for (var, default) in [("CC", "cc"), ("CXX", "c++")] {
        let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
        output(&compiler, &["--version"]).hash(&mut h);
        compiler.hash(&mut h);
    }
    for var in ["CFLAGS", "CXXFLAGS", "LDFLAGS", "ENGINE_CPU_VARIANTS"] {
        println!("cargo:rerun-if-env-changed={var}");
        std::env::var(var).ok().hash(&mut h);
    }
    if native {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
        let cpu = output("bash", &[&manifest.join("scripts/cpu-key.sh").to_string_lossy()]);
        assert!(!cpu.is_empty(), "scripts/cpu-key.sh printed no key");
        cpu.hash(&mut h);
    }
    Some(root.join(format!("ggml-{:016x}", h.finish())))
}

/// Hashes the names and contents of the files under `dir`, in name order.
fn hash_tree(dir: &std::path::Path, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("ggml's source directory")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        path.file_name().hash(h);
        if path.is_dir() {
            hash_tree(&path, h);
        } else {
            std::fs::read(&path).expect("a ggml source file").hash(h);
        }
    }
}

/// Copies the libraries in `files` into the cache `entry`, marked complete last (entries are
/// written under a temporary name and renamed, so a concurrent or killed build leaves none half
/// written), and returns the entry's copy.
fn store_in_cache(files: &std::path::Path, entry: &std::path::Path) -> PathBuf {
    let parent = entry.parent().expect("the cache directory");
    std::fs::create_dir_all(parent).expect("ENGINE_GGML_CACHE");
    let tmp = parent.join(format!(
        ".{}.{}",
        entry.file_name().expect("entry name").to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("files")).expect("a cache entry");
    copy_libraries(files, &tmp.join("files"));
    std::fs::write(tmp.join("complete"), b"").expect("a cache entry");
    if std::fs::rename(&tmp, entry).is_err() {
        if entry.join("complete").exists() {
            // Another build stored the same entry first.
            let _ = std::fs::remove_dir_all(&tmp);
        } else {
            // Not written by this function: replaced.
            let _ = std::fs::remove_dir_all(entry);
            std::fs::rename(&tmp, entry).expect("a cache entry");
        }
    }
    entry.join("files")
}

/// Compiler flags for every ggml target: no AMX instructions. ggml 0.25.3's AMX kernels fault on
/// the Xeons that have AMX (the tile configuration can be dropped by the compiler, and the
/// tile-data permission is requested on one thread only), and `-march=native` would compile them
/// in there. llama.cpp's oracle is built with the same flags (scripts/llama-cpp.sh).
const NO_AMX: &str = if cfg!(target_arch = "x86_64") {
    "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
} else {
    ""
};

/// The builds of a portable build, target lists in order: ggml's base and RPC libraries and every
/// CPU variant but the one that needs AMX (its kernels are the faulting ones, see `NO_AMX`; its own
/// flags would turn them back on), then libggml itself without its dependencies (`ggml/fast`:
/// ggml makes every backend module a dependency of libggml, which links none of them).
/// `ENGINE_CPU_VARIANTS` ("x64 haswell ...") builds only those variants (the test suite's portable
/// build, c-tests/portable_test.sh).
fn portable_build_steps(cmake: &str, build: &std::path::Path) -> Vec<Vec<String>> {
    let only: Option<Vec<String>> = std::env::var("ENGINE_CPU_VARIANTS")
        .ok()
        .map(|v| v.split_whitespace().map(|v| format!("ggml-cpu-{v}")).collect());
    let help = std::process::Command::new(cmake)
        .arg("--build")
        .arg(build)
        .args(["--target", "help"])
        .output()
        .expect("cmake --build --target help");
    let help = String::from_utf8_lossy(&help.stdout);
    let variants: Vec<String> = help
        .lines()
        .filter_map(|l| l.trim().strip_prefix("... "))
        .filter(|t| t.starts_with("ggml-cpu-") && !t.ends_with("-feats") && *t != AMX_VARIANT)
        .filter(|t| only.as_ref().is_none_or(|o| o.iter().any(|v| v == t)))
        .map(String::from)
        .collect();
    for wanted in only.iter().flatten() {
        assert!(
            variants.contains(wanted),
            "ENGINE_CPU_VARIANTS: no CPU variant {wanted} to build"
        );
    }
    let mut first = vec!["ggml-base".to_string(), "ggml-rpc".to_string()];
    first.extend(variants);
    vec![first, vec!["ggml/fast".to_string()]]
}

/// ggml's CPU variant compiled with AMX (`GGML_CPU_ALL_VARIANTS`).
const AMX_VARIANT: &str = "ggml-cpu-sapphirerapids";

/// "MAJOR.MINOR.PATCH" from ggml's CMakeLists.txt (what `ggml_version()` answers).
fn ggml_version(src: &std::path::Path) -> String {
    let text = std::fs::read_to_string(src.join("CMakeLists.txt")).expect("ggml's CMakeLists.txt");
    let part = |name: &str| {
        let key = format!("set(GGML_VERSION_{name} ");
        let line = text.lines().find_map(|l| l.trim().strip_prefix(key.as_str()));
        line.and_then(|l| l.strip_suffix(')'))
            .expect("ggml's version in CMakeLists.txt")
            .trim()
            .to_string()
    };
    format!("{}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH"))
}
