//! `analyze diff`.

use std::io::Write;
use std::path::PathBuf;

use analyze::aggregate::Profile;
use analyze::views;

use crate::recording::profile;
use analyze::cli::{DiffArgs, Select};

/// `analyze diff`: both recordings through the pipeline, then the differential views.
pub fn diff(args: &DiffArgs, stdout: &mut impl Write) -> anyhow::Result<()> {
    use views::diff;
    let [before, after] = args.inputs.as_slice() else {
        anyhow::bail!(
            "diff takes two recordings: -i BEFORE -i AFTER ({} given)",
            args.inputs.len()
        );
    };
    let profile_of = |input: &PathBuf| -> anyhow::Result<Profile> {
        let select = Select {
            input: input.clone(),
            filter: args.filter.clone(),
        };
        profile(&select, false)
    };
    let (b, a) = (profile_of(before)?, profile_of(after)?);
    let lines = diff::folded(
        &views::folded::folded(&b, false),
        &views::folded::folded(&a, false),
        !args.no_normalize,
    )?;
    if args.folded {
        let mut out = std::io::BufWriter::new(stdout);
        for l in &lines {
            writeln!(out, "{l}")?;
        }
        out.flush()?;
        return Ok(());
    }
    let title = format!(
        "{} -> {}: {} ({})",
        before.display(),
        after.display(),
        a.event,
        a.unit
    );
    let file = std::fs::File::create(&args.output)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    diff::write_svg(&lines, &title, &a.unit, std::io::BufWriter::new(file))
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    write!(stdout, "{}", diff::table(&diff::changes(&b, &a), args.top))?;
    eprintln!("analyze: wrote {}", args.output.display());
    Ok(())
}
