//! annotate: which lines and which instructions of a function its samples fell on.
//!
//! A consumer of the pipeline's resolve and symbolize stages (the same unwinding, address
//! translation and symbols as report): each sample's frames are (file, SVMA) keys; those in
//! the chosen function are counted per instruction. *Self* counts the samples whose leaf is
//! the instruction; *Total* the samples whose stack passes through it (call sites, where a
//! caller frame's return address points after the call). Per source line the same, with the
//! line's inline chain: a sample in an inlined helper counts for the helper's line and, in
//! Total, for the line that called it.

pub mod disasm;
pub mod render;
pub mod source;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::pipeline::{Resolved, Symbols};
use crate::resolve::{FileId, Source};
use crate::symbolize::{self, SourceFrame};

/// A function that samples fell in: a user function (file, symbol start) or a kernel one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FunctionId {
    User { file: FileId, start: u64 },
    Kernel { start: u64 },
}

/// A function and the samples in it.
#[derive(Debug, Clone)]
pub struct FunctionCost {
    pub id: FunctionId,
    pub name: String,
    pub dso: String,
    /// Weight of the samples whose leaf frame is in it.
    pub self_weight: u64,
    /// Weight of the samples with a frame in it (each sample once).
    pub total_weight: u64,
}

/// One frame of a selected sample: its function (`None` where nothing names it) and where in
/// it.
struct FrameAt {
    function: Option<FunctionId>,
    /// For user frames, the SVMA (a return address's call site is one byte before it); for
    /// kernel frames the address.
    addr: u64,
    is_return: bool,
}

/// The frames of sample `i`, leaf first.
fn frames_of<'a>(
    r: &'a Resolved<'_>,
    symbols: &'a Symbols,
    i: usize,
) -> impl Iterator<Item = FrameAt> + 'a {
    let (s, _) = r.samples[i];
    // Kernel frames count unless -U left them out of the lookups.
    let kernel: &[u64] = if symbols.kernel_addrs.is_empty() {
        &[]
    } else {
        &s.kernel
    };
    let kernel = kernel.iter().map(move |&a| FrameAt {
        function: symbols
            .kernel(a)
            .and_then(|i| i.start)
            .map(|start| FunctionId::Kernel { start }),
        addr: a,
        is_return: false,
    });
    let user = r.keys[i]
        .iter()
        .zip(&r.stacks[i].user)
        .map(move |(key, loc)| match *key {
            Some((file, lookup)) => FrameAt {
                function: symbols
                    .user((file, lookup))
                    .and_then(|i| i.start)
                    .map(|start| FunctionId::User { file, start }),
                addr: lookup.addr,
                is_return: lookup.is_return,
            },
            None => FrameAt {
                function: None,
                addr: loc.addr,
                is_return: loc.is_return,
            },
        });
    kernel.chain(user)
}

/// Whether a frame at `depth` of its stack is where the sample was taken.
fn is_leaf(depth: usize, f: &FrameAt) -> bool {
    depth == 0 && !f.is_return
}

/// Every function with samples, hottest (by self, then total) first.
pub fn function_costs(r: &Resolved<'_>, symbols: &Symbols) -> Vec<FunctionCost> {
    let mut costs: FxHashMap<FunctionId, (u64, u64)> = FxHashMap::default();
    let mut seen: FxHashSet<FunctionId> = FxHashSet::default();
    for (i, (_, weight)) in r.samples.iter().enumerate() {
        seen.clear();
        for (depth, f) in frames_of(r, symbols, i).enumerate() {
            let Some(function) = f.function else { continue };
            let c = costs.entry(function).or_default();
            if is_leaf(depth, &f) {
                c.0 += weight;
            }
            if seen.insert(function) {
                c.1 += weight;
            }
        }
    }
    let files = r.resolver.files();
    let mut out: Vec<FunctionCost> = costs
        .into_iter()
        .map(|(id, (self_weight, total_weight))| {
            let (name, dso) = match id {
                FunctionId::User { file, start } => (
                    name_in_file(symbols, file, start),
                    files[file as usize].dso.clone(),
                ),
                FunctionId::Kernel { start } => {
                    (kernel_name(symbols, start), "[kernel.kallsyms]".to_string())
                }
            };
            FunctionCost {
                id,
                name,
                dso,
                self_weight,
                total_weight,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (b.self_weight, b.total_weight, &a.name, a.id).cmp(&(
            a.self_weight,
            a.total_weight,
            &b.name,
            b.id,
        ))
    });
    out
}

fn name_in_file(symbols: &Symbols, file: FileId, start: u64) -> String {
    symbols.file_infos[file as usize]
        .iter()
        .find(|i| i.start == Some(start))
        .map_or_else(String::new, |i| i.frames[0].function.clone())
}

fn kernel_name(symbols: &Symbols, start: u64) -> String {
    symbols
        .kernel_infos
        .iter()
        .find(|i| i.start == Some(start))
        .map_or_else(String::new, |i| i.frames[0].function.clone())
}

/// The functions `query` names among `functions`: exact names, else the demangled query's,
/// else those containing it (case-sensitive, then not). `Err` lists the closest names.
pub fn find<'f>(
    functions: &'f [FunctionCost],
    query: &str,
) -> Result<Vec<&'f FunctionCost>, Vec<&'f str>> {
    let demangled = symbolize::demangle(query);
    let tiers: [&dyn Fn(&str) -> bool; 4] = [
        &|n| n == query,
        &|n| n == demangled,
        &|n| n.contains(query),
        &|n| n.to_lowercase().contains(&query.to_lowercase()),
    ];
    for tier in tiers {
        let hits: Vec<&FunctionCost> = functions.iter().filter(|f| tier(&f.name)).collect();
        if !hits.is_empty() {
            return Ok(hits);
        }
    }
    let mut close: Vec<(f64, &str)> = functions
        .iter()
        .map(|f| (strsim::jaro_winkler(query, &f.name), f.name.as_str()))
        .collect();
    close.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    close.dedup_by_key(|c| c.1);
    Err(close.into_iter().take(5).map(|c| c.1).collect())
}

/// An instruction of the annotated function with its samples.
#[derive(Debug, Clone)]
pub struct Instruction {
    pub addr: u64,
    pub len: u32,
    /// Empty where the code could not be decoded.
    pub text: String,
    pub self_weight: u64,
    pub total_weight: u64,
    /// Its source location, innermost (inlined) first; empty without DWARF.
    pub location: Vec<SourceFrame>,
}

/// A source line of the annotated function: where its instructions came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The function whose code it is (the inlined one for inlined code).
    pub function: Option<String>,
    /// How deep it is inlined: 0 for the function's own lines.
    pub depth: usize,
    pub self_weight: u64,
    pub total_weight: u64,
}

/// A function annotated: its instructions and its source lines, with their samples.
#[derive(Debug, Clone)]
pub struct Annotation {
    pub name: String,
    pub dso: String,
    pub build_id: Option<String>,
    pub start: u64,
    pub end: u64,
    pub self_weight: u64,
    pub total_weight: u64,
    pub instructions: Vec<Instruction>,
    /// In order of first appearance by address.
    pub lines: Vec<Line>,
    /// Aligned with `instructions`: the index in `lines` of each one's own line.
    pub line_of: Vec<usize>,
    /// Why the instructions are not shown, when they are not.
    pub not_decoded: Option<String>,
}

/// How to annotate.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub syntax: disasm::Syntax,
}

/// Annotates a user function; `Err` says why it cannot be (kernel or JIT code, a file that is
/// not here).
pub fn annotate(
    r: &Resolved<'_>,
    symbols: &Symbols,
    function: &FunctionCost,
    style: Style,
) -> Result<Annotation, String> {
    let FunctionId::User { file, start } = function.id else {
        return Err(format!(
            "{} is kernel code: annotate reads the code of user-space ELF files only",
            function.name
        ));
    };
    let Some(Source::Elf { elf, debug }) = &r.resolver.files()[file as usize].source else {
        return Err(format!(
            "{} is in {}, which is not an ELF file here (JIT code, or a file that is gone)",
            function.name, function.dso
        ));
    };
    let (name, start, end) = symbolize::function_at(elf, debug.as_deref(), start)
        .ok_or_else(|| format!("{}: no symbol at {start:#x}", function.name))?;

    // The instructions (or, where they cannot be decoded, one entry per sampled address).
    let arch = object::File::parse(&*elf.bytes).map(|o| object::Object::architecture(&o));
    let bitness = arch.map_err(|e| e.to_string()).and_then(disasm::bitness);
    let code = elf.bytes_at(start, end);
    let name_of = |a: u64| {
        let (n, s, _) = symbolize::function_at(elf, debug.as_deref(), a)?;
        Some(if a == s {
            n
        } else {
            format!("{n}+{:#x}", a - s)
        })
    };
    let (decoded, not_decoded) = match (bitness, code) {
        (Ok(bits), Some(code)) => (
            disasm::disassemble(code, start, bits, style.syntax, &name_of),
            None,
        ),
        (Err(why), _) => (Vec::new(), Some(why)),
        (Ok(_), None) => (
            Vec::new(),
            Some(format!(
                "{}: the file holds no code at {start:#x}..{end:#x}",
                elf.name
            )),
        ),
    };

    // This function's frames in every sample: (sample, address, leaf?).
    let mut hits: Vec<(usize, u64, bool)> = Vec::new();
    for i in 0..r.samples.len() {
        for (depth, f) in frames_of(r, symbols, i).enumerate() {
            if f.function == Some(function.id) {
                let at = f.addr.wrapping_sub(f.is_return as u64);
                hits.push((i, at, is_leaf(depth, &f)));
            }
        }
    }
    let mut instructions: Vec<Instruction> = if decoded.is_empty() {
        let mut addrs: Vec<u64> = hits.iter().map(|h| h.1).collect();
        addrs.sort_unstable();
        addrs.dedup();
        addrs
            .into_iter()
            .map(|addr| Instruction {
                addr,
                len: 1,
                text: String::new(),
                self_weight: 0,
                total_weight: 0,
                location: Vec::new(),
            })
            .collect()
    } else {
        decoded
            .into_iter()
            .map(|d| Instruction {
                addr: d.addr,
                len: d.len,
                text: d.text,
                self_weight: 0,
                total_weight: 0,
                location: Vec::new(),
            })
            .collect()
    };
    let addrs: Vec<u64> = instructions.iter().map(|i| i.addr).collect();
    for (insn, location) in
        instructions
            .iter_mut()
            .zip(symbolize::source_locations(elf, debug.as_deref(), &addrs))
    {
        insn.location = location;
    }

    let (mut lines, chains) = lines_of(&instructions);
    let line_of: Vec<usize> = chains.iter().map(|c| c[0]).collect();
    // Count: per instruction and per line, each sample once.
    let index_of = |a: u64| instructions.partition_point(|i| i.addr <= a).checked_sub(1);
    let mut self_weight = 0;
    let mut total_weight = 0;
    let mut insn_self = vec![0u64; instructions.len()];
    let mut insn_total = vec![0u64; instructions.len()];
    let mut k = 0;
    let mut seen_insns: FxHashSet<usize> = FxHashSet::default();
    let mut seen_lines: FxHashSet<usize> = FxHashSet::default();
    while k < hits.len() {
        let sample = hits[k].0;
        let weight = r.samples[sample].1;
        total_weight += weight;
        seen_insns.clear();
        seen_lines.clear();
        while k < hits.len() && hits[k].0 == sample {
            let (_, at, leaf) = hits[k];
            k += 1;
            let Some(n) = index_of(at) else { continue };
            if leaf {
                self_weight += weight;
                insn_self[n] += weight;
                lines[line_of[n]].self_weight += weight;
            }
            if seen_insns.insert(n) {
                insn_total[n] += weight;
            }
            for &l in &chains[n] {
                if seen_lines.insert(l) {
                    lines[l].total_weight += weight;
                }
            }
        }
    }
    for (i, insn) in instructions.iter_mut().enumerate() {
        insn.self_weight = insn_self[i];
        insn.total_weight = insn_total[i];
    }
    Ok(Annotation {
        name,
        dso: function.dso.clone(),
        build_id: elf.build_id_hex(),
        start,
        end,
        self_weight,
        total_weight,
        instructions,
        lines,
        line_of,
        not_decoded,
    })
}

/// The source lines of `instructions` (each instruction's innermost location), in order of
/// first appearance, and for each instruction the lines its samples pass through: its own
/// first, then the call sites it is inlined at (which become lines too, so that their Total
/// shows).
fn lines_of(instructions: &[Instruction]) -> (Vec<Line>, Vec<Vec<usize>>) {
    let mut lines: Vec<Line> = Vec::new();
    let mut index: FxHashMap<(Option<String>, Option<u32>, usize), usize> = FxHashMap::default();
    let mut chains = Vec::with_capacity(instructions.len());
    for insn in instructions {
        let levels = insn.location.len().max(1);
        let mut chain = Vec::with_capacity(levels);
        // Outermost first, so that a call site precedes the lines inlined at it.
        for level in (0..levels).rev() {
            let loc = insn.location.get(level);
            let depth = levels - level - 1;
            let (file, line) = (loc.and_then(|l| l.file.clone()), loc.and_then(|l| l.line));
            let i = *index.entry((file.clone(), line, depth)).or_insert_with(|| {
                lines.push(Line {
                    file,
                    line,
                    function: loc.and_then(|l| l.function.clone()),
                    depth,
                    self_weight: 0,
                    total_weight: 0,
                });
                lines.len() - 1
            });
            chain.push(i);
        }
        chain.reverse();
        chains.push(chain);
    }
    (lines, chains)
}
