//! `--archive`: the recording with what analyzing it elsewhere needs, by `analyze archive`.

use std::path::PathBuf;

/// Runs `analyze archive` (the binary beside this one) on the recording at `path`.
pub fn archive(path: &std::path::Path) -> anyhow::Result<()> {
    let analyze = std::env::current_exe()?.with_file_name("analyze");
    let mut out = path.as_os_str().to_owned();
    out.push(".tar.zst");
    let out = PathBuf::from(out);
    let status = std::process::Command::new(&analyze)
        .arg("archive")
        .arg("-i")
        .arg(path)
        .arg("-o")
        .arg(&out)
        .status()
        .map_err(|e| anyhow::anyhow!("--archive: cannot run {}: {e}", analyze.display()))?;
    anyhow::ensure!(
        status.success(),
        "--archive: analyze archive failed ({status})"
    );
    crate::host::chown_to_invoking_user(&out);
    Ok(())
}
