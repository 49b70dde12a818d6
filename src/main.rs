use std::process::ExitCode;

use clap::Parser;
use trellis::cli::{Cli, run};

fn main() -> ExitCode {
    return_large_buffers_to_the_os();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map(|runtime| runtime.block_on(serve()))
        .unwrap_or_else(|error| {
            eprintln!("trellis: error: cannot start the runtime: {error}");
            ExitCode::FAILURE
        })
}

/// glibc raises its mmap threshold to the size of the largest block freed,
/// so after the first login every later argon2 buffer (19 MiB) is carved
/// from the heap and stays resident. A fixed threshold keeps blocks of
/// 1 MiB and more in their own mappings, returned to the OS when freed
/// (docs/benchmarks.md: idle RSS). Called before any other thread exists.
#[allow(unsafe_code)]
fn return_large_buffers_to_the_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; it runs before the runtime
    // starts any thread, and M_MMAP_THRESHOLD takes a byte count.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

async fn serve() -> ExitCode {
    // A missing .env is normal; values already in the environment win.
    let _ = dotenvy::dotenv();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("trellis: error: {error:#}");
            tracing::error!(error = format!("{error:#}"), "exiting");
            ExitCode::from(trellis::ops::exit_code(&error))
        }
    }
}
