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
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libengine.so.0");

    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    // The ggml tree whose headers qts_ggml_sys binds (GGML_SRC, set by .cargo/config.toml).
    let ggml = PathBuf::from(std::env::var("GGML_SRC").expect("GGML_SRC (see vendor/README.md)"));
    build_shared_ggml(&ggml);
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
    use std::process::Command;
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let build = out.join("ggml-build");
    let lib = out.join("ggml-lib");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let on_off = |b: bool| if b { "ON" } else { "OFF" };
    let cmake = std::env::var("ENGINE_CMAKE").unwrap_or_else(|_| "cmake".to_string());
    let run = |cmd: &mut Command, what: &str| {
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("{what}: cannot run {cmake}: {e}"));
        assert!(status.success(), "{what} failed ({status})");
    };
    run(
        Command::new(&cmake)
            .arg("-S")
            .arg(src)
            .arg("-B")
            .arg(&build)
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .arg("-DBUILD_SHARED_LIBS=ON")
            .arg("-DGGML_BUILD_TESTS=OFF")
            .arg("-DGGML_BUILD_EXAMPLES=OFF")
            .arg("-DGGML_CCACHE=OFF")
            // llamafile's tiled matrix kernels: llama.cpp's build has them, and its numbers with them.
            .arg("-DGGML_LLAMAFILE=ON")
            .arg("-DGGML_RPC=ON")
            .arg(format!("-DGGML_NATIVE={}", on_off(feature("NATIVE"))))
            .arg(format!("-DGGML_CUDA={}", on_off(feature("CUDA"))))
            .arg(format!("-DGGML_BLAS={}", on_off(feature("BLAS"))))
            .arg(format!("-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={}", lib.display()))
            // The libraries find each other beside themselves wherever they are copied.
            .arg("-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON")
            .arg("-DCMAKE_INSTALL_RPATH=$ORIGIN")
            .stdout(std::process::Stdio::null()),
        "configuring ggml",
    );
    let jobs = std::env::var("NUM_JOBS").unwrap_or_else(|_| "1".to_string());
    run(
        Command::new(&cmake)
            .arg("--build")
            .arg(&build)
            .arg("--parallel")
            .arg(jobs)
            .stdout(std::process::Stdio::null()),
        "building ggml",
    );
    println!("cargo:rustc-env=ENGINE_GGML_VERSION={}", ggml_version(src));
    println!("cargo:rustc-link-search=native={}", lib.display());
    // What libllama.so links: the CPU backend is reached through ggml's registry.
    for name in ["ggml", "ggml-base"] {
        println!("cargo:rustc-link-lib=dylib={name}");
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");

    // OUT_DIR is <target>/<profile>/build/engine-<hash>/out; libengine.so is in <target>/<profile>.
    let profile_dir = out.ancestors().nth(3).expect("OUT_DIR under the target directory");
    for entry in std::fs::read_dir(&lib).expect("ggml's library directory") {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        if !name.starts_with("libggml") || !name.contains(".so") {
            continue;
        }
        let dest = profile_dir.join(&name);
        let _ = std::fs::remove_file(&dest);
        if path.is_symlink() {
            let target = std::fs::read_link(&path).expect("symlink");
            std::os::unix::fs::symlink(target, &dest).expect("symlink ggml library");
        } else {
            std::fs::copy(&path, &dest).expect("copy ggml library");
        }
    }
}

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
