//! A traced event's text as perf script prints it: the event's `print fmt` (a C format
//! string, then C expressions over the record's fields) evaluated as libtraceevent evaluates
//! it. The expressions kernel and bpfperf formats use are understood: fields (`REC->f`,
//! `REC->f[i]`, `__get_str(f)`), integers, casts, arithmetic, bit and comparison operators,
//! `?:`, `__print_symbolic`, `__print_flags`, `__print_hex`, `__print_hex_str` and
//! `__builtin_expect`, names as 0 (the kernel's constants and globals, as libtraceevent reads
//! them); and the kernel's `%p` extensions for addresses (`%pI4`, `%pI6c`, `%pM`, `%pU`) and
//! code (`%pS`, named by the caller's kernel symbols). A format that uses anything else
//! (`__print_array`, a function of the kernel's) is not taken: [`PrintFmt::of`] says no, and
//! the caller prints the event's fields instead. One difference on purpose: comparisons are
//! signed where the values are, as the kernel makes them (libtraceevent compares in unsigned
//! 64 bits: perf prints a failed recv's sock_recv_length as `length = -11, error = 0`).

use format::{Field, FieldKind, TraceFormat, Value};

use super::printf::{quoted, Arg, Kind, Printf, Ptr};

/// An event's print format, parsed once and rendered per record.
#[derive(Debug)]
pub struct PrintFmt {
    printf: Printf,
    args: Vec<Expr>,
}

/// A value an expression has in one record.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Int(i128),
    Str(String),
    /// An array field's bytes (for `%pI4` and the like).
    Bytes(Vec<u8>),
}

/// Names a kernel address for `%pS`/`%ps`: its function and the function's start; none where
/// no symbol of the recording's kernel covers it.
pub type KernelNames<'a> = dyn Fn(u64) -> Option<(String, u64)> + 'a;

#[derive(Debug, Clone)]
enum Expr {
    Int(i128),
    Str(String),
    Field(Field),
    /// `REC->f[i]` of an array of `bits`-wide elements.
    Index(Field, u32, Box<Expr>),
    /// To an integer type of this many bits, signed or not.
    Cast(u32, bool, Box<Expr>),
    Unary(char, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// The name of the value (else the value in hex).
    Symbolic(Box<Expr>, Vec<(i128, String)>),
    /// The names of the flags set, joined by the separator (bits left over in hex).
    Flags(Box<Expr>, String, Vec<(i128, String)>),
    /// `__print_hex` (bytes apart: `true`) and `__print_hex_str` of an array: its first so
    /// many bytes in hex.
    Hex(Box<Expr>, Box<Expr>, bool),
}

impl PrintFmt {
    /// The print format of `format`, if every part of it is understood.
    pub fn of(format: &TraceFormat) -> Option<PrintFmt> {
        let spec = format.print_fmt.trim().strip_prefix('"')?;
        let (text, rest) = quoted(spec).ok()?;
        let printf = Printf::of_format(&text).ok()?;
        let mut p = Parser {
            tokens: tokens(rest)?,
            at: 0,
            format,
            depth: 0,
        };
        let mut args = Vec::new();
        while p.eat(",") {
            args.push(p.ternary()?);
        }
        (p.at == p.tokens.len() && args.len() == printf.convs().count())
            .then_some(PrintFmt { printf, args })
    }

    /// The text of one record (`raw`: the event's payload), kernel addresses of `%pS` and
    /// `%ps` named by `names` (in hex where it has no name); `?` for what the record is too
    /// short to hold.
    pub fn render(&self, raw: &[u8], names: &KernelNames) -> String {
        let args: Vec<Arg> = self
            .args
            .iter()
            .zip(self.printf.convs())
            .map(|(e, conv)| match eval(e, raw) {
                Some(Val::Int(n)) => number_arg(n, conv.kind, names),
                Some(Val::Str(s)) => Arg::Text(s.into()),
                Some(Val::Bytes(b)) => Arg::Bytes(b.into()),
                None => Arg::Text("?".into()),
            })
            .collect();
        self.printf.render(&args)
    }
}

/// Number `n` as a conversion of `kind` takes it: for `%pS` and `%ps` a kernel address, named
/// by `names`.
pub(super) fn number_arg(n: i128, kind: Kind, names: &KernelNames) -> Arg<'static> {
    match kind {
        Kind::Pointer(Ptr::Symbol { offset }) => Arg::Text(symbol(n as u64, offset, names).into()),
        _ => Arg::Number(n),
    }
}

/// A kernel address as `%pS` (`function+0xoff`) or `%ps` (`function`) prints it, as perf
/// names it: in hex where no symbol covers it.
fn symbol(addr: u64, offset: bool, names: &KernelNames) -> String {
    match names(addr) {
        Some((name, start)) if offset => format!("{name}+{:#x}", addr.wrapping_sub(start)),
        Some((name, _)) => name,
        None => format!("{addr:#x}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(i128),
    /// A number with a `U` suffix, of so many bits (64 with `L` or `LL` too): C negates it
    /// within them (`-9ULL` is 2^64 - 9, which btrfs's formats compare fields with).
    Unsigned(i128, u32),
    Ident(String),
    Str(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 25] = [
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", ",", "?",
    ":", "+", "-", "*", "/", "%", "&", "|",
];
const SINGLE: [&str; 6] = ["^", "~", "!", "<", ">", "."];

fn tokens(s: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i] as char).is_ascii_alphanumeric() {
                i += 1;
            }
            let word = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let n = match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
                Some(hex) => i128::from_str_radix(hex, 16).ok()?,
                None => word.parse().ok()?,
            };
            let suffix = s[start + word.len()..i].to_ascii_lowercase();
            out.push(match suffix.as_str() {
                "u" => Token::Unsigned(n, 32),
                s if s.contains('u') => Token::Unsigned(n, 64),
                _ => Token::Num(n),
            });
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].to_string()));
        } else if c == '\'' {
            // A character constant, as its code: `REC->syn ? 'S' : ' '`.
            let (code, len) = match b.get(i + 1..)? {
                [b'\\', e, b'\'', ..] => (escaped(*e)?, 4),
                [ch, b'\'', ..] if ch.is_ascii() && *ch != b'\\' => (*ch, 3),
                _ => return None,
            };
            out.push(Token::Num(code.into()));
            i += len;
        } else if c == '"' {
            let (text, rest) = quoted(&s[i + 1..]).ok()?;
            // Adjacent literals are one, as in C: `"KVM_EXIT_" "UNKNOWN"`.
            match out.last_mut() {
                Some(Token::Str(before)) => before.push_str(&text),
                _ => out.push(Token::Str(text)),
            }
            i = s.len() - rest.len();
        } else {
            let p = PUNCTS
                .iter()
                .chain(&SINGLE)
                .find(|p| s[i..].starts_with(*p))?;
            out.push(Token::Punct(p));
            i += p.len();
        }
    }
    Some(out)
}

/// The code of the character that a backslash and `e` stand for in a C character constant.
fn escaped(e: u8) -> Option<u8> {
    Some(match e {
        b'n' => b'\n',
        b't' => b'\t',
        b'0' => 0,
        b'\\' | b'\'' | b'"' => e,
        _ => return None,
    })
}

struct Parser<'f> {
    tokens: Vec<Token>,
    at: usize,
    format: &'f TraceFormat,
    /// How deep the expression being read is nested (bounded: a damaged file's format may
    /// open a million parentheses).
    depth: usize,
}

/// A name that is a table's whole value (`{ IOPRIO_CLASS_NONE, "none" }`), as libtraceevent
/// reads it: the softirq and hrtimer names it knows, and -1 for any other, which no value but
/// -1 matches (perf prints block_rq_issue's I/O class 2, whose table names `IOPRIO_CLASS_BE`,
/// as `0x2`, and btrfs's action 0, named `BTRFS_ADD_DELAYED_REF`, as `0x0`).
fn table_name(name: &str) -> i128 {
    const KNOWN: [&str; 10] = [
        "HI_SOFTIRQ",
        "TIMER_SOFTIRQ",
        "NET_TX_SOFTIRQ",
        "NET_RX_SOFTIRQ",
        "BLOCK_SOFTIRQ",
        "IRQ_POLL_SOFTIRQ",
        "TASKLET_SOFTIRQ",
        "SCHED_SOFTIRQ",
        "HRTIMER_SOFTIRQ",
        "RCU_SOFTIRQ",
    ];
    match name {
        "HRTIMER_NORESTART" => 0,
        "HRTIMER_RESTART" => 1,
        _ => KNOWN
            .iter()
            .position(|k| *k == name)
            .map_or(-1, |i| i as i128),
    }
}

/// The deepest nesting read (parentheses, unary operators and casts, operators in a chain):
/// kernel formats reach about 40 (13 parentheses deep). Bounded for the stack: 128 take
/// 0.5-1 MiB of a test thread's 2 in an unoptimized build.
const MAX_DEPTH: usize = 128;

/// Binary operators from the loosest to the tightest, as C binds them.
const LEVELS: [&[&str]; 9] = [
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
];
const MULTIPLY: &[&str] = &["*", "/", "%"];

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, p: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Punct(q)) if *q == p);
        self.at += hit as usize;
        hit
    }

    fn expect(&mut self, p: &str) -> Option<()> {
        self.eat(p).then_some(())
    }

    /// `read` a level deeper in the nesting; none past [`MAX_DEPTH`].
    fn nested(&mut self, read: fn(&mut Self) -> Option<Expr>) -> Option<Expr> {
        self.depth += 1;
        let e = if self.depth > MAX_DEPTH {
            None
        } else {
            read(self)
        };
        self.depth -= 1;
        e
    }

    fn ternary(&mut self) -> Option<Expr> {
        self.nested(Self::ternary_within)
    }

    fn ternary_within(&mut self) -> Option<Expr> {
        let cond = self.binary(0)?;
        if !self.eat("?") {
            return Some(cond);
        }
        let yes = self.ternary()?;
        self.expect(":")?;
        let no = self.ternary()?;
        Some(Expr::Cond(Box::new(cond), Box::new(yes), Box::new(no)))
    }

    /// The binary operator next, if it binds at least as tightly as level `min` (an index
    /// into [`LEVELS`], [`MULTIPLY`] past them), and its level.
    fn operator(&self, min: usize) -> Option<(&'static str, usize)> {
        let Some(Token::Punct(p)) = self.peek() else {
            return None;
        };
        let levels = LEVELS.iter().chain(std::iter::once(&MULTIPLY));
        levels
            .enumerate()
            .skip(min)
            .find_map(|(level, ops)| ops.iter().find(|op| *op == p).map(|&op| (op, level)))
    }

    /// Operands joined by binary operators of level `min` or tighter, as C binds them (by
    /// precedence climbing: a paren's worth of nesting costs a few frames, not one per level).
    fn binary(&mut self, min: usize) -> Option<Expr> {
        let mut left = self.unary()?;
        // Each operator of a chain makes the tree a level deeper (evaluating it recurses
        // that deep): counted as nesting.
        let depth = self.depth;
        let tree = loop {
            let Some((op, level)) = self.operator(min) else {
                break Some(left);
            };
            self.at += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                break None;
            }
            let Some(right) = self.binary(level + 1) else {
                break None;
            };
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        };
        self.depth = depth;
        tree
    }

    fn unary(&mut self) -> Option<Expr> {
        self.nested(Self::unary_within)
    }

    fn unary_within(&mut self) -> Option<Expr> {
        for op in ['-', '~', '!'] {
            if self.eat(&op.to_string()) {
                // Of an unsigned number, within its bits: `-9ULL`, `~0U`.
                if let Some(&Token::Unsigned(n, bits)) = self.peek() {
                    self.at += 1;
                    let e = Expr::Unary(op, Box::new(Expr::Int(n)));
                    return Some(Expr::Cast(bits, false, Box::new(e)));
                }
                return Some(Expr::Unary(op, Box::new(self.unary()?)));
            }
        }
        if let Some(cast) = self.cast() {
            let (bits, signed) = cast;
            return Some(Expr::Cast(bits, signed, Box::new(self.unary()?)));
        }
        self.primary()
    }

    /// `(TYPE)` where TYPE is an integer or pointer type: its bits and signedness.
    fn cast(&mut self) -> Option<(u32, bool)> {
        let Some(Token::Punct("(")) = self.peek() else {
            return None;
        };
        let mut words = Vec::new();
        let mut i = self.at + 1;
        loop {
            match self.tokens.get(i)? {
                Token::Ident(w) => words.push(w.as_str()),
                Token::Punct("*") => words.push("*"),
                Token::Punct(")") => break,
                _ => return None,
            }
            i += 1;
        }
        let ty = int_type(&words)?;
        self.at = i + 1;
        Some(ty)
    }

    fn primary(&mut self) -> Option<Expr> {
        let token = self.peek()?.clone();
        self.at += 1;
        match token {
            Token::Num(n) | Token::Unsigned(n, _) => Some(Expr::Int(n)),
            Token::Str(s) => Some(Expr::Str(s)),
            Token::Punct("(") => {
                let e = self.ternary()?;
                self.expect(")")?;
                Some(e)
            }
            Token::Ident(w) if w == "REC" => {
                self.expect("->")?;
                let field = self.field()?;
                if !self.eat("[") {
                    return Some(Expr::Field(field));
                }
                let index = self.ternary()?;
                self.expect("]")?;
                let bits = match field.kind {
                    FieldKind::Array | FieldKind::CharArray => element_bits(&field.type_name)?,
                    _ => return None,
                };
                Some(Expr::Index(field, bits, Box::new(index)))
            }
            Token::Ident(w) if w == "__print_hex" || w == "__print_hex_str" => {
                self.expect("(")?;
                // Of an array field, fixed or dynamic (of an integer, libtraceevent prints its
                // bytes in memory).
                let bytes = self.ternary()?;
                if !matches!(&bytes, Expr::Field(f) if f.kind != FieldKind::Int) {
                    return None;
                }
                self.expect(",")?;
                let len = self.ternary()?;
                self.expect(")")?;
                Some(Expr::Hex(
                    Box::new(bytes),
                    Box::new(len),
                    w == "__print_hex",
                ))
            }
            // Its first argument, as libtraceevent reads it (mmap's error checks).
            Token::Ident(w) if w == "__builtin_expect" => {
                self.expect("(")?;
                let value = self.ternary()?;
                self.expect(",")?;
                self.ternary()?;
                self.expect(")")?;
                Some(value)
            }
            Token::Ident(w) if w == "__get_str" || w == "__get_dynamic_array" => {
                self.expect("(")?;
                let field = self.field()?;
                self.expect(")")?;
                Some(Expr::Field(field))
            }
            Token::Ident(w) if w == "__print_symbolic" => {
                self.expect("(")?;
                let value = self.ternary()?;
                let table = self.table()?;
                Some(Expr::Symbolic(Box::new(value), table))
            }
            Token::Ident(w) if w == "__print_flags" => {
                self.expect("(")?;
                let value = self.ternary()?;
                self.expect(",")?;
                let Some(Token::Str(sep)) = self.peek().cloned() else {
                    return None;
                };
                self.at += 1;
                let table = self.table()?;
                Some(Expr::Flags(Box::new(value), sep, table))
            }
            // Any other name is 0, as libtraceevent reads it as a number: a constant the
            // kernel left unconverted (`(1 << BTRFS_ORDERED_REGULAR)` is 1), or a global no
            // recording holds (kmem's `vmemmap_base`: perf prints mm_page_alloc's page as
            // its pfn). Not a function's call, which it does not know either.
            Token::Ident(_) if self.peek() != Some(&Token::Punct("(")) => Some(Expr::Int(0)),
            _ => None,
        }
    }

    /// A field's name, and the field.
    fn field(&mut self) -> Option<Field> {
        let Some(Token::Ident(name)) = self.peek().cloned() else {
            return None;
        };
        self.at += 1;
        self.format.field(&name).cloned()
    }

    /// `, { VALUE, "NAME" }, ... )`: the pairs of a symbol or flag table, and its end.
    fn table(&mut self) -> Option<Vec<(i128, String)>> {
        let mut pairs = Vec::new();
        while self.eat(",") {
            self.expect("{")?;
            let value = match self.tokens.get(self.at..self.at + 2) {
                Some([Token::Ident(name), Token::Punct(",")]) => {
                    self.at += 1;
                    Val::Int(table_name(name))
                }
                _ => eval(&self.ternary()?, &[])?,
            };
            self.expect(",")?;
            // A name, or NULL (`((void *)0)`: the end of a table, as some write it).
            let name = eval(&self.ternary()?, &[])?;
            self.expect("}")?;
            match (value, name) {
                // libtraceevent reads a value as the text of its number, and text that
                // starts with a minus as -1 (`{ -6ULL, "TREE_LOG" }` among them).
                (Val::Int(v), Val::Str(name)) => {
                    pairs.push((if v as i64 >= 0 { v } else { -1 }, name))
                }
                (_, Val::Int(0)) => {}
                _ => return None,
            }
        }
        self.expect(")")?;
        Some(pairs)
    }
}

/// The bits and signedness of a C integer or pointer type named by `words`.
fn int_type(words: &[&str]) -> Option<(u32, bool)> {
    if words.last() == Some(&"*") {
        return Some((64, false));
    }
    let unsigned = words.contains(&"unsigned");
    let rest: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "unsigned" | "signed" | "const" | "volatile"))
        .collect();
    let known = |w: &str| -> Option<(u32, bool)> {
        let (signed, bits) = match w.trim_start_matches('_') {
            "u8" => (false, 8),
            "u16" => (false, 16),
            "u32" => (false, 32),
            "u64" => (false, 64),
            "s8" => (true, 8),
            "s16" => (true, 16),
            "s32" => (true, 32),
            "s64" => (true, 64),
            // linux/types.h's short names, and C's fixed-width ones.
            "uint" => (false, 32),
            "ulong" => (false, 64),
            "ushort" => (false, 16),
            "int8_t" => (true, 8),
            "int16_t" => (true, 16),
            "int32_t" | "kernel_rwf_t" => (true, 32),
            "int64_t" => (true, 64),
            "uint8_t" => (false, 8),
            "uint16_t" => (false, 16),
            "uint32_t" => (false, 32),
            "uint64_t" => (false, 64),
            "bool" | "Bool" => (false, 8),
            "size_t" | "sector_t" | "ino_t" | "pgoff_t" | "phys_addr_t" | "dma_addr_t" => {
                (false, 64)
            }
            "loff_t" | "off_t" | "ktime_t" | "ssize_t" => (true, 64),
            "gfp_t" | "dev_t" | "uid_t" | "gid_t" => (false, 32),
            "pid_t" => (true, 32),
            "umode_t" => (false, 16),
            _ => return None,
        };
        Some((bits, signed))
    };
    match rest.as_slice() {
        [] if unsigned => Some((32, false)),
        ["char"] => Some((8, !unsigned)),
        ["short"] | ["short", "int"] => Some((16, !unsigned)),
        ["int"] => Some((32, !unsigned)),
        ["long"] | ["long", "int"] | ["long", "long"] | ["long", "long", "int"] => {
            Some((64, !unsigned))
        }
        [w] if !unsigned => known(w),
        _ => None,
    }
}

/// The bits of one element of an array field of type `type_name` (`__u8`, `u32`, `char`).
fn element_bits(type_name: &str) -> Option<u32> {
    let words: Vec<&str> = type_name.split_whitespace().collect();
    int_type(&words).map(|(bits, _)| bits)
}

fn truthy(v: &Val) -> bool {
    match v {
        Val::Int(n) => *n != 0,
        // An array's address, never NULL.
        Val::Str(_) | Val::Bytes(_) => true,
    }
}

/// `e`'s value in record `raw`; `None` where the record is too short for a field it reads,
/// or a division by zero.
fn eval(e: &Expr, raw: &[u8]) -> Option<Val> {
    let int = |e: &Expr| match eval(e, raw)? {
        Val::Int(n) => Some(n),
        Val::Str(_) | Val::Bytes(_) => None,
    };
    Some(match e {
        Expr::Int(n) => Val::Int(*n),
        Expr::Str(s) => Val::Str(s.clone()),
        Expr::Field(f) => match f.value(raw)? {
            Value::Signed(n) => Val::Int(n.into()),
            Value::Unsigned(n) => Val::Int(n.into()),
            Value::Str(s) => Val::Str(s),
            Value::Bytes(b) => Val::Bytes(b),
        },
        Expr::Index(f, bits, index) => {
            let i = usize::try_from(int(index)?).ok()?;
            let width = (*bits / 8) as usize;
            let at = f.offset.checked_add(i.checked_mul(width)?)?;
            if i.checked_add(1)?.checked_mul(width)? > f.size {
                return None;
            }
            let mut v = [0u8; 8];
            v[..width].copy_from_slice(raw.get(at..at + width)?);
            Val::Int(u64::from_le_bytes(v).into())
        }
        Expr::Cast(bits, signed, inner) => {
            let n = int(inner)? as u64 & (u64::MAX >> (64 - bits));
            let shift = 64 - bits;
            Val::Int(if *signed {
                (((n << shift) as i64) >> shift).into()
            } else {
                n.into()
            })
        }
        Expr::Unary(op, inner) => {
            let n = int(inner)?;
            Val::Int(match op {
                '-' => n.wrapping_neg(),
                '~' => i128::from(!(n as u64)),
                _ => i128::from(n == 0),
            })
        }
        Expr::Binary(op, a, b) => {
            if *op == "&&" || *op == "||" {
                let a = truthy(&eval(a, raw)?);
                if (*op == "&&") != a {
                    return Some(Val::Int(a.into()));
                }
                return Some(Val::Int(truthy(&eval(b, raw)?).into()));
            }
            let (a, b) = (int(a)?, int(b)?);
            Val::Int(match *op {
                "|" => a | b,
                "^" => a ^ b,
                "&" => a & b,
                "==" => (a == b).into(),
                "!=" => (a != b).into(),
                "<" => (a < b).into(),
                ">" => (a > b).into(),
                "<=" => (a <= b).into(),
                ">=" => (a >= b).into(),
                "<<" => i128::from((a as u64).checked_shl(u32::try_from(b).ok()?).unwrap_or(0)),
                ">>" => i128::from((a as u64).checked_shr(u32::try_from(b).ok()?).unwrap_or(0)),
                "+" => a.wrapping_add(b),
                "-" => a.wrapping_sub(b),
                "*" => a.wrapping_mul(b),
                // In 64 unsigned bits, as libtraceevent divides: writeback's `(jiffies -
                // REC->dirtied_when) / 250`, jiffies read as 0, is (2^64 - t) / 250.
                "/" => (a as u64).checked_div(b as u64)?.into(),
                _ => (a as u64).checked_rem(b as u64)?.into(),
            })
        }
        Expr::Cond(c, yes, no) => {
            if truthy(&eval(c, raw)?) {
                eval(yes, raw)?
            } else {
                eval(no, raw)?
            }
        }
        Expr::Symbolic(value, table) => {
            let v = int(value)?;
            match table.iter().find(|(k, _)| *k as u64 == v as u64) {
                Some((_, name)) => Val::Str(name.clone()),
                None => Val::Str(format!("{:#x}", v as u64)),
            }
        }
        Expr::Hex(bytes, len, spaced) => {
            let bytes = match eval(bytes, raw)? {
                Val::Bytes(b) => b,
                Val::Str(s) => s.into_bytes(),
                Val::Int(_) => return None,
            };
            // No more than the record holds, whatever its length field says.
            let len = usize::try_from(int(len)?).unwrap_or(0).min(bytes.len());
            let hex: Vec<String> = bytes[..len].iter().map(|b| format!("{b:02x}")).collect();
            Val::Str(hex.join(if *spaced { " " } else { "" }))
        }
        Expr::Flags(value, sep, table) => {
            // As libtraceevent goes through the table: each flag (a value above 0) set is
            // named and taken off; once none is left, a name it reads as -1 (one it does not
            // know) is named, without a separator, and ends the list; the rest in hex.
            let mut v = int(value)? as u64;
            let mut text = String::new();
            let mut named = false;
            for (k, name) in table {
                let k = *k as i64;
                if v == 0 && k < 0 {
                    text.push_str(name);
                    break;
                }
                if k > 0 && v & k as u64 == k as u64 {
                    if named {
                        text.push_str(sep);
                    }
                    text.push_str(name);
                    named = true;
                    v &= !(k as u64);
                }
            }
            if v != 0 {
                if named {
                    text.push_str(sep);
                }
                text.push_str(&format!("{v:#x}"));
            }
            Val::Str(text)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(fields: &str, print_fmt: &str) -> TraceFormat {
        let text = format!(
            "name: e\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n{fields}\nprint fmt: {print_fmt}\n"
        );
        TraceFormat::parse(&text).unwrap()
    }

    #[test]
    fn syscall_and_bpfperf_formats_print_as_perf_does() {
        let f = format(
            "\tfield:unsigned int fd;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:const char * buf;\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:size_t count;\toffset:24;\tsize:8;\tsigned:0;",
            r#""fd: 0x%08lx, buf: 0x%08lx, count: 0x%08lx", ((unsigned long)(REC->fd)), ((unsigned long)(REC->buf)), ((unsigned long)(REC->count))"#,
        );
        let mut raw = vec![0u8; 32];
        raw[8] = 1;
        raw[16..24].copy_from_slice(&0x55e6d05d1000u64.to_le_bytes());
        raw[24] = 100;
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(
            p.render(&raw, &|_| None),
            "fd: 0x00000001, buf: 0x55e6d05d1000, count: 0x00000064"
        );
        // bpfperf:block_io's device: MAJOR and MINOR written out, as the kernel's are.
        let f = format(
            "\tfield:unsigned int dev;\toffset:8;\tsize:4;\tsigned:0;\n\
             \tfield:char rwbs[8];\toffset:12;\tsize:8;\tsigned:0;",
            r#""%d,%d %s", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->rwbs"#,
        );
        let mut raw = vec![0u8; 20];
        raw[8..12].copy_from_slice(&(254u32 << 20).to_le_bytes());
        raw[12..14].copy_from_slice(b"RA");
        assert_eq!(
            PrintFmt::of(&f).unwrap().render(&raw, &|_| None),
            "254,0 RA"
        );
        // Array elements, %Ld, %p, and a record too short for a field.
        let f = format(
            "\tfield:__u8 addr[4];\toffset:8;\tsize:4;\tsigned:0;\n\
             \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;",
            r#""%u.%u ret=%Ld %p", REC->addr[0], REC->addr[3], REC->ret, REC->ret"#,
        );
        let mut raw = vec![0u8; 24];
        raw[8..12].copy_from_slice(&[10, 0, 0, 2]);
        raw[16..24].copy_from_slice(&(-2i64).to_le_bytes());
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw, &|_| None), "10.2 ret=-2 0xfffffffffffffffe");
        assert_eq!(p.render(&raw[..12], &|_| None), "10.2 ret=? ?");
    }

    #[test]
    fn symbolic_flags_and_conditions_print_as_libtraceevent_does() {
        let fields = "\tfield:long prev_state;\toffset:8;\tsize:8;\tsigned:1;";
        // sched_switch's, as 6.x kernels write it (shortened).
        let f = format(
            fields,
            r#""prev_state=%s%s", (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002) + 1) << 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002) + 1) << 1) ? "+" : """#,
        );
        let p = PrintFmt::of(&f).unwrap();
        let raw = |v: i64| {
            let mut r = vec![0u8; 16];
            r[8..].copy_from_slice(&v.to_le_bytes());
            r
        };
        assert_eq!(p.render(&raw(0), &|_| None), "prev_state=R");
        assert_eq!(p.render(&raw(1), &|_| None), "prev_state=S");
        assert_eq!(p.render(&raw(3), &|_| None), "prev_state=S|D");
        assert_eq!(p.render(&raw(8), &|_| None), "prev_state=R+");
        let f = format(
            fields,
            r#""%s", __print_symbolic(REC->prev_state, { 1, "ONE" }, { 2, "TWO" })"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(2), &|_| None), "TWO");
        assert_eq!(p.render(&raw(5), &|_| None), "0x5");
        // A name the kernel left as a table's value is -1 unless libtraceevent knows it (perf
        // prints block_rq_issue's class 2 as 0x2, btrfs's action 0 as 0x0); within an
        // expression it is 0; a negative value is -1 too.
        let f = format(
            fields,
            r#""%s", __print_symbolic(REC->prev_state, { CLASS_NONE, "none" }, { CLASS_BE, "be" }, { NET_RX_SOFTIRQ, "rx" }, { (1 << ORDERED_REGULAR), "one" }, { -6ULL, "log" })"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(0), &|_| None), "0x0");
        assert_eq!(p.render(&raw(-1), &|_| None), "none");
        assert_eq!(p.render(&raw(2), &|_| None), "0x2");
        assert_eq!(p.render(&raw(3), &|_| None), "rx");
        assert_eq!(p.render(&raw(1), &|_| None), "one");
        assert_eq!(p.render(&raw(-6), &|_| None), "0xfffffffffffffffa");
        // Flags as libtraceevent lists them: set flags above 0 named and taken off; with none
        // left, an unknown name's entry named (no separator) and the list ends; a 0 entry never.
        let f = format(
            fields,
            r#""%s", __print_flags(REC->prev_state, "|", { 0, "ZERO" }, { 1, "A" }, { UNKNOWN, "NONE" }, { 4, "C" })"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(0), &|_| None), "NONE");
        assert_eq!(p.render(&raw(1), &|_| None), "ANONE");
        assert_eq!(p.render(&raw(5), &|_| None), "A|C");
        assert_eq!(p.render(&raw(13), &|_| None), "A|C|0x8");
        // Unsigned numbers negate within their bits: btrfs's `>= -9ULL` is false of 10.
        let f = format(
            fields,
            r#""%d %d %u", REC->prev_state >= -9ULL, REC->prev_state >= -9, ~0U"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(10), &|_| None), "0 1 4294967295");
        // A global is 0 (kmem's `vmemmap_base`); `__builtin_expect` its first argument.
        let f = format(
            fields,
            r#""%lx %d", ((struct page *)vmemmap_base) + (REC->prev_state), __builtin_expect(!!(REC->prev_state >= -4095), 0)"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(0x14a15b), &|_| None), "14a15b 1");
        // Division and remainder in 64 unsigned bits.
        let f = format(
            fields,
            r#""%lu %lu %ld", (jiffies - REC->prev_state) / 250, (0 - REC->prev_state) % 7, REC->prev_state / 2"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(
            p.render(&raw(4316406129), &|_| None),
            "73786976277572581 2 2158203064"
        );
        // Character constants (tcp_hash_bad_header's flags).
        let f = format(
            fields,
            r#""[%c%c%c]", REC->prev_state & 1 ? 'F' : ' ', REC->prev_state & 2 ? '\'' : '.', '\\'"#,
        );
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(p.render(&raw(1), &|_| None), "[F.\\]");
        assert_eq!(p.render(&raw(2), &|_| None), "[ '\\]");
        for bad in [r#""%c", 'ab'"#, r#""%c", '\q'"#, r#""%c", '"#] {
            assert!(PrintFmt::of(&format(fields, bad)).is_none(), "{bad}");
        }
    }

    /// btrfs's `%pU` of its file system id, xfs's `%.*s` of a name as long as its length
    /// field, and linux/types.h's `uint`.
    #[test]
    fn uuids_and_lengths_taken_from_fields_print_as_perf_does() {
        let f = format(
            "\tfield:u8 fsid[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:int namelen;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\
             \tfield:u64 lsn;\toffset:32;\tsize:8;\tsigned:0;",
            r#""%pU: name %.*s lsn %d/%d", REC->fsid, REC->namelen, __get_str(name), ((uint)((REC->lsn)>>32)), ((uint)(REC->lsn))"#,
        );
        let mut raw = vec![0u8; 48];
        for (i, b) in raw[8..24].iter_mut().enumerate() {
            *b = 0x10 * i as u8 + 0x0a;
        }
        raw[24] = 3;
        // The name's 8 bytes at 48, after the fixed fields.
        raw[28..32].copy_from_slice(&(48u32 | 8 << 16).to_le_bytes());
        raw.extend_from_slice(b"longname");
        raw[32..40].copy_from_slice(&(2u64 << 32 | 7).to_le_bytes());
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(
            p.render(&raw, &|_| None),
            "0a1a2a3a-4a5a-6a7a-8a9a-aabacadaeafa: name lon lsn 2/7"
        );
        // A record too short for the id: `?`.
        assert!(p.render(&raw[..12], &|_| None).starts_with("?: name"));
    }

    /// `__print_hex` and `__print_hex_str` of an array, as many bytes as a field says, never
    /// more than the record holds.
    #[test]
    fn hex_of_arrays_prints_as_perf_does() {
        let f = format(
            "\tfield:u8 addr[8];\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:u8 len;\toffset:16;\tsize:1;\tsigned:0;",
            r#""%s|%s", __print_hex(REC->addr, REC->len), __print_hex_str(REC->addr, REC->len + 20)"#,
        );
        let mut raw = vec![0u8; 17];
        raw[8..16].copy_from_slice(&[2, 0, 0, 0xab, 0, 0x1f, 7, 8]);
        raw[16] = 6;
        let p = PrintFmt::of(&f).unwrap();
        assert_eq!(
            p.render(&raw, &|_| None),
            "02 00 00 ab 00 1f|020000ab001f0708"
        );
    }

    #[test]
    fn formats_it_cannot_evaluate_are_not_taken() {
        let fields = "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;";
        for fmt in [
            r#""%pB", (void *)REC->ip"#,
            r#""%s", __print_hex(REC->ip, 8)"#,
            r#""%lx", some_function(REC->ip)"#,
            r#""%lx", REC->missing"#,
            r#""%lx %lx", REC->ip"#,
            r#""%lx"#,
        ] {
            assert!(PrintFmt::of(&format(fields, fmt)).is_none(), "{fmt}");
        }
        // Damaged formats (bytes changed, spans cut or repeated, 20,000 of them): refused or
        // rendered, never a panic.
        let good = [
            concat!(
                r#""prev_state=%s%s", (REC->ip & ((((0x00000000 | 0x00000001 | 0x00000002) + 1)"#,
                r#" << 1) - 1)) ? __print_flags(REC->ip & 3, "|", { 0x00000001, "S" }, "#,
                r#"{ 0x00000002, "D" }) : "R", REC->ip & 4 ? "+" : """#
            ),
            concat!(
                r#""%d,%d %s", ((unsigned int) ((REC->ip) >> 20)), ((unsigned int) ((REC->ip)"#,
                r#" & ((1U << 20) - 1))), __print_symbolic(REC->ip, { 0, "A" " B" }, "#,
                r#"{ -1, ((void *)0) })"#
            ),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let raw = [0xffu8; 16];
        for round in 0..20_000 {
            let mut b = good[round % 2].as_bytes().to_vec();
            for _ in 0..1 + next(4) {
                let at = next(b.len());
                match next(3) {
                    0 if at < b.len() => b[at] = b"()\"{},-?:|&<>0x1REC"[next(19)],
                    1 => b.truncate(at),
                    _ => {
                        let end = (at + next(40)).min(b.len());
                        let span = b[at..end].to_vec();
                        b.splice(at..at, span);
                    }
                }
            }
            let fmt = String::from_utf8_lossy(&b);
            if let Some(p) = PrintFmt::of(&format(fields, &fmt)) {
                p.render(&raw, &|_| None);
                p.render(&raw[..3], &|_| None);
            }
        }
        // A damaged file's: nesting without end is refused, not followed down the stack.
        for deep in [
            "(".repeat(100_000),
            "-".repeat(100_000),
            "(int)".repeat(100_000),
            "1+".repeat(100_000),
            "(1+".repeat(300),
        ] {
            let fmt = format!(r#""%d", {deep}REC->ip"#);
            assert!(PrintFmt::of(&format(fields, &fmt)).is_none());
        }
    }
}
