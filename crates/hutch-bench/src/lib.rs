//! `hutch bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}
pub async fn main(_a: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
