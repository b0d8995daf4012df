use std::process::ExitCode;
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}
pub async fn doctor(_a: DoctorArgs) -> ExitCode {
    ExitCode::FAILURE
}
