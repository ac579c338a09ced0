//! `bpfperf-manual OUTDIR`: writes bpfperf's man pages and shell completions under OUTDIR
//! (`scripts/install` runs it; it is not installed itself).

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: bpfperf-manual OUTDIR");
        std::process::exit(2);
    };
    let written = bpfperf_manual::write(out.as_ref(), &bpfperf_manual::commands())?;
    eprintln!(
        "bpfperf-manual: wrote {} files under {}",
        written.len(),
        std::path::Path::new(&out).display()
    );
    Ok(())
}
