use std::process::ExitCode;

use clap::Parser;
use trellis::cli::{Cli, run};

#[tokio::main]
async fn main() -> ExitCode {
    // A missing .env is normal; values already in the environment win.
    let _ = dotenvy::dotenv();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("trellis: error: {error:#}");
            tracing::error!(error = format!("{error:#}"), "exiting");
            ExitCode::FAILURE
        }
    }
}
