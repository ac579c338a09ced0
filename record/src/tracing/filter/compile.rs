//! A parsed filter against one event's format: each predicate's field found and type-checked,
//! the tree written out as the postfix program filter.bpf.h runs.

use bpf::trace::{
    Cmp, Filter, FilterInsn, Glob, Operand, Pattern, StrOperand, FILTER_INSNS, FILTER_PATTERNS,
    FILTER_PATTERN_LEN,
};
use format::{Field, FieldKind, TraceFormat};

use super::error::Error;
use super::parse::{Expr, Op, Pred, Value};

/// What a name in a filter reads.
enum Source<'a> {
    Field(&'a Field),
    Comm,
    Pid,
    Tid,
    Cpu,
}

/// Names that read the current task when the event has no field of that name (the kernel
/// takes `comm` and `cpu`, in either case; bpfperf adds `pid`, the process, and `tid`).
fn special(name: &str) -> Option<Source<'static>> {
    Some(match name {
        "comm" | "COMM" => Source::Comm,
        "cpu" | "CPU" => Source::Cpu,
        "pid" => Source::Pid,
        "tid" => Source::Tid,
        _ => return None,
    })
}

pub fn compile(expr: &Expr, format: &TraceFormat) -> Result<Filter, Error> {
    let mut c = Compiler {
        format,
        filter: Filter::default(),
    };
    c.emit(expr)?;
    let steps = c.filter.insns.len();
    if steps > FILTER_INSNS {
        return Err(Error {
            column: 1,
            message: format!(
                "the filter needs {steps} steps in the kernel, and at most {FILTER_INSNS} fit (at most {} conditions)",
                FILTER_INSNS / 2
            ),
        });
    }
    Ok(c.filter)
}

struct Compiler<'a> {
    format: &'a TraceFormat,
    filter: Filter,
}

impl Compiler<'_> {
    fn emit(&mut self, e: &Expr) -> Result<(), Error> {
        match e {
            Expr::Or(a, b) | Expr::And(a, b) => {
                self.emit(a)?;
                self.emit(b)?;
                self.filter.insns.push(if matches!(e, Expr::Or(..)) {
                    FilterInsn::Or
                } else {
                    FilterInsn::And
                });
            }
            Expr::Not(a) => {
                self.emit(a)?;
                self.filter.insns.push(FilterInsn::Not);
            }
            Expr::Pred(p) => {
                let insn = self.pred(p)?;
                self.filter.insns.push(insn);
            }
        }
        Ok(())
    }

    fn source(&self, p: &Pred) -> Result<Source<'_>, Error> {
        if let Some(f) = self.format.field(&p.field) {
            return Ok(Source::Field(f));
        }
        special(&p.field).ok_or_else(|| {
            let names = self.format.fields.iter().map(|f| f.name.as_str());
            let near = crate::tracing::closest::list(
                &p.field,
                names.chain(["comm", "pid", "tid", "cpu"]),
                5,
            );
            Error {
                column: p.field_col,
                message: format!(
                    "{} has no field '{}' (closest: {near})",
                    self.format.name, p.field
                ),
            }
        })
    }

    fn pred(&mut self, p: &Pred) -> Result<FilterInsn, Error> {
        let at = |column, message: String| Error { column, message };
        let source = self.source(p)?;
        let string_op = matches!(p.op, Op::Eq | Op::Ne | Op::Glob);
        let operand = match &source {
            Source::Comm => Some(StrOperand::Comm),
            Source::Field(f) if f.is_string() => Some(match f.kind {
                FieldKind::CharArray => StrOperand::CharArray {
                    offset: offset(f, p)?,
                    size: f.size.min(FILTER_PATTERN_LEN) as u8,
                },
                FieldKind::DataLoc => StrOperand::DataLoc {
                    offset: offset(f, p)?,
                },
                _ => {
                    return Err(at(
                        p.field_col,
                        format!(
                            "'{}' is a __rel_loc string: filters cannot read those",
                            p.field
                        ),
                    ))
                }
            }),
            _ => None,
        };
        if let Some(operand) = operand {
            if !string_op {
                return Err(at(
                    p.op_col,
                    format!(
                        "'{}' compares numbers, and '{}' is a string (use ==, != or ~)",
                        p.op.text(),
                        p.field
                    ),
                ));
            }
            let text = match &p.value {
                Value::Str(s) | Value::Number(_, s) => s,
            };
            let pattern = pattern(text).map_err(|m| at(p.value_col, m))?;
            let index = self.pattern_index(pattern, p.value_col)?;
            return Ok(FilterInsn::String {
                operand,
                equal: p.op != Op::Ne,
                pattern: index,
            });
        }
        let (operand, unsigned, what) = match source {
            Source::Field(f) => {
                if !matches!(f.kind, FieldKind::Int) || ![1, 2, 4, 8].contains(&f.size) {
                    return Err(at(
                        p.field_col,
                        format!(
                            "'{}' ({}) is neither a number nor a string: filters cannot compare it",
                            p.field, f.type_name
                        ),
                    ));
                }
                let operand = Operand::Field {
                    offset: offset(f, p)?,
                    size: f.size as u8,
                    signed: f.signed,
                };
                (operand, !f.signed, f.type_name.as_str())
            }
            Source::Pid => (Operand::Pid, false, "the process id"),
            Source::Tid => (Operand::Tid, false, "the thread id"),
            Source::Cpu => (Operand::Cpu, false, "the CPU"),
            Source::Comm => unreachable!("comm is a string"),
        };
        if p.op == Op::Glob {
            return Err(at(
                p.op_col,
                format!(
                    "'~' matches strings, and '{}' is a number ({what})",
                    p.field
                ),
            ));
        }
        let value = match (&p.value, &operand) {
            // A negative number for an unsigned field, in the field's width (as C converts it).
            (Value::Number(v, _), Operand::Field { size, .. }) if unsigned && *v < 0 && *size < 8 => {
                v & ((1i64 << (8 * size)) - 1)
            }
            (Value::Number(v, _), _) => *v,
            (Value::Str(_), _) if what.contains('*') => {
                return Err(at(
                    p.value_col,
                    format!(
                        "'{}' is a pointer ({what}): the record holds its address, not the text it points to, \
                         so it compares with numbers only (perf's kernel filters cannot match it as a string either)",
                        p.field
                    ),
                ))
            }
            (Value::Str(s), _) => {
                return Err(at(
                    p.value_col,
                    format!("'{}' is a number ({what}), and '{s}' is not", p.field),
                ))
            }
        };
        let cmp = match p.op {
            Op::Eq => Cmp::Eq,
            Op::Ne => Cmp::Ne,
            Op::Lt => Cmp::Lt,
            Op::Le => Cmp::Le,
            Op::Gt => Cmp::Gt,
            Op::Ge => Cmp::Ge,
            Op::BitAnd => Cmp::BitAnd,
            Op::Glob => unreachable!("refused above"),
        };
        Ok(FilterInsn::Number {
            operand,
            cmp,
            value,
            unsigned,
        })
    }

    /// The index of `pattern` among the filter's, added if new.
    fn pattern_index(&mut self, pattern: Pattern, column: usize) -> Result<u8, Error> {
        let patterns = &mut self.filter.patterns;
        if let Some(i) = patterns.iter().position(|p| *p == pattern) {
            return Ok(i as u8);
        }
        if patterns.len() == FILTER_PATTERNS {
            return Err(Error {
                column,
                message: format!("a filter holds at most {FILTER_PATTERNS} different strings"),
            });
        }
        patterns.push(pattern);
        Ok(patterns.len() as u8 - 1)
    }
}

fn offset(f: &Field, p: &Pred) -> Result<u16, Error> {
    u16::try_from(f.offset).map_err(|_| Error {
        column: p.field_col,
        message: format!(
            "'{}' lies too far into the record ({} bytes)",
            p.field, f.offset
        ),
    })
}

/// perf's simple globs: `x`, `x*`, `*x`, `*x*` (`*` alone matches everything).
fn pattern(text: &str) -> Result<Pattern, String> {
    let (front, rest) = match text.strip_prefix('*') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (back, middle) = match rest.strip_suffix('*') {
        Some(m) => (true, m),
        None => (false, rest),
    };
    if middle.contains(['*', '?', '[']) {
        return Err(format!(
            "'{text}': only the patterns x, x*, *x and *x* are supported (no '?', '[' or inner '*')"
        ));
    }
    if middle.len() > FILTER_PATTERN_LEN {
        return Err(format!(
            "'{text}' is longer than the {FILTER_PATTERN_LEN} bytes a filter compares"
        ));
    }
    let glob = match (front, back) {
        (false, false) => Glob::Full,
        (false, true) => Glob::Prefix,
        (true, false) if middle.is_empty() => Glob::Prefix,
        (true, false) => Glob::Suffix,
        (true, true) => Glob::Contains,
    };
    Ok(Pattern {
        glob,
        text: middle.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let p = |t: &str| pattern(t).map(|p| (p.glob, String::from_utf8(p.text).unwrap()));
        assert_eq!(p("bash"), Ok((Glob::Full, "bash".into())));
        assert_eq!(p("ba*"), Ok((Glob::Prefix, "ba".into())));
        assert_eq!(p("*sh"), Ok((Glob::Suffix, "sh".into())));
        assert_eq!(p("*as*"), Ok((Glob::Contains, "as".into())));
        assert_eq!(p("*"), Ok((Glob::Prefix, "".into())));
        assert_eq!(p(""), Ok((Glob::Full, "".into())));
        assert!(p("b*h").unwrap_err().contains("only the patterns"));
        assert!(p("ba?h").is_err());
        assert!(p(&"x".repeat(65)).unwrap_err().contains("64 bytes"));
        assert!(p(&format!("{}*", "x".repeat(64))).is_ok());
    }
}
