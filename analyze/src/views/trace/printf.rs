//! bcc `trace`'s format argument: a C format string in double quotes, then its arguments,
//! comma-separated: `"%s wrote %d bytes", comm, count`. Conversions: `%d %i %u %x %X %o %c
//! %s %p` with C's length modifiers (`l`, `ll`, `L`, `z`, `h`, `hh`: `%lu`, `%llx`, `%Ld`), an
//! optional `-`, `0` or `#` flag, a width and a precision, either of them `*` (taken from an
//! argument before the value's: `%-16s`, `%08x`, `%#x`, `%.3s`, `%.*s`), and `%%`. Numbers
//! convert as C's printf converts them: `%d` and `%u` take the low 32 bits, `%ld`/`%lu` 64,
//! `%hu` 16, `%c` the low byte; `%p` prints `0x...` (`(nil)` for 0); `%s` takes text or a
//! number; the kernel's `%pI4 %pI6 %pI6c %pM %pIS` (`p`, `c`) print an array field's bytes as
//! an address, `%pU` as a UUID, `%pS %ps` a kernel address by its symbol. The kernel's print
//! formats (see [`super::print_fmt`]) use the same conversions.

/// A conversion of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub kind: Kind,
    /// The bits a number converts from (for `%d %i %u %x`): 64 with `l`, `ll`, `L` or `z`,
    /// 16 with `h`, 8 with `hh`, else 32.
    pub bits: u32,
    pub left: bool,
    pub zero: bool,
    /// `#`: hex with `0x` before it.
    pub alt: bool,
    pub width: usize,
    /// `.N`: at most N characters of text, at least N digits of a number.
    pub precision: Option<usize>,
}

/// What a conversion prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `%d`, `%i`.
    Signed,
    /// `%u`.
    Unsigned,
    /// `%x`, `%X`.
    Hex { upper: bool },
    /// `%o`.
    Octal,
    /// `%c`.
    Char,
    /// `%s`.
    Str,
    /// `%p` and the kernel's extensions of it.
    Pointer(Ptr),
    /// A `*` width: the argument is the next conversion's width (negative: left-aligned).
    Width,
    /// A `*` precision: the argument is the next conversion's precision (negative: none).
    Precision,
}

/// What a `%p` conversion prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ptr {
    /// `%p`: the value in hex, `(nil)` for 0.
    Address,
    /// `%pI4`: 4 bytes as `10.0.0.1`.
    Ip4,
    /// `%pI6`: 16 bytes as eight groups of 4 hex digits; `%pI6c` compressed as the kernel
    /// compresses them (`::ffff:127.0.0.1`).
    Ip6 { compressed: bool },
    /// `%pM`: 6 bytes as `aa:bb:cc:dd:ee:ff`.
    Mac,
    /// `%pIS` with `p` (`:port` after it) and `c` (IPv6 compressed), in either order: a
    /// `struct sockaddr` (its family in the machine's order, then `sockaddr_in`'s or
    /// `sockaddr_in6`'s fields) as `10.0.0.1:80` or `[::1]:80`; nothing for another family.
    SockAddr { port: bool, compressed: bool },
    /// `%pU`: 16 bytes as a UUID, `0a1b2c3d-...`, in their order and in lower case, as
    /// libtraceevent prints every `%pU` (the kernel's `b`, `B`, `l`, `L` are not taken).
    Uuid,
    /// `%pS` (`function+0xoff`) and `%ps` (`function`): a kernel address by its symbol, which
    /// the caller hands over as text.
    Symbol { offset: bool },
}

impl Kind {
    /// Whether the argument must be a number.
    pub fn numeric(self) -> bool {
        self != Kind::Str
    }

    /// Whether the conversion prints an array's bytes (an address: `%pI4`, `%pI6`, `%pM`,
    /// `%pIS`).
    pub fn takes_bytes(self) -> bool {
        matches!(
            self,
            Kind::Pointer(Ptr::Ip4 | Ptr::Ip6 { .. } | Ptr::Mac | Ptr::SockAddr { .. } | Ptr::Uuid)
        )
    }
}

/// A piece of the format: text, or where the next argument goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Arg(Conv),
}

/// A parsed format argument: its pieces and its arguments' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Printf {
    pub pieces: Vec<Piece>,
    pub args: Vec<String>,
}

/// A value handed to a conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg<'a> {
    Number(i128),
    Text(std::borrow::Cow<'a, str>),
    /// An array's bytes (for `%pI4` and the like).
    Bytes(std::borrow::Cow<'a, [u8]>),
}

impl Printf {
    /// Parses `"FORMAT", ARG, ...`; the error says what is wrong.
    pub fn parse(spec: &str) -> Result<Printf, String> {
        let spec = spec.trim();
        let rest = spec
            .strip_prefix('"')
            .ok_or("it must start with a format in double quotes")?;
        let (format, rest) = quoted(rest)?;
        let rest = rest.trim();
        let args: Vec<String> = if rest.is_empty() {
            Vec::new()
        } else {
            let list = rest
                .strip_prefix(',')
                .ok_or_else(|| format!("expected a comma after the format, found {rest:?}"))?;
            list.split(',').map(|a| a.trim().to_string()).collect()
        };
        if let Some(empty) = args.iter().position(String::is_empty) {
            return Err(format!("argument {} is empty", empty + 1));
        }
        let pieces = pieces(&format)?;
        let convs = pieces.iter().filter(|p| matches!(p, Piece::Arg(_))).count();
        if convs != args.len() {
            let stars = pieces
                .iter()
                .filter(|p| matches!(p, Piece::Arg(c) if matches!(c.kind, Kind::Width | Kind::Precision)))
                .count();
            let of_stars = match stars {
                0 => String::new(),
                n => format!(", {n} of them for a * width or precision"),
            };
            return Err(format!(
                "the format has {convs} conversion(s){of_stars} and {} argument(s)",
                args.len()
            ));
        }
        Ok(Printf { pieces, args })
    }

    /// The format string `format` (its escapes read: see [`quoted`]), with no arguments
    /// named: for a caller that brings its own.
    pub fn of_format(format: &str) -> Result<Printf, String> {
        Ok(Printf {
            pieces: pieces(format)?,
            args: Vec::new(),
        })
    }

    /// The conversions, in the order of the arguments.
    pub fn convs(&self) -> impl Iterator<Item = Conv> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Arg(c) => Some(*c),
            Piece::Text(_) => None,
        })
    }

    /// The text for these arguments (one per conversion, in order; a `*` width or precision
    /// is a conversion of its own, before its value's).
    pub fn render(&self, args: &[Arg<'_>]) -> String {
        let mut out = String::new();
        let mut args = args.iter();
        let (mut width, mut precision) = (None, None);
        for p in &self.pieces {
            let mut c = match p {
                Piece::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Piece::Arg(c) => *c,
            };
            let a = args.next();
            // A `*` takes its argument as C's int.
            let n = match a {
                Some(Arg::Number(n)) => Some(*n as i32),
                _ => None,
            };
            match c.kind {
                Kind::Width => width = n,
                Kind::Precision => precision = n,
                _ => {
                    if let Some(w) = width.take() {
                        c.left |= w < 0;
                        c.width = (w.unsigned_abs() as usize).min(MAX_WIDTH);
                    }
                    if let Some(p) = precision.take() {
                        c.precision = usize::try_from(p).ok().map(|p| p.min(MAX_WIDTH));
                    }
                    match a {
                        Some(a) => pad(&mut out, &convert(c, a), c),
                        None => out.push('?'),
                    }
                }
            }
        }
        out
    }
}

/// The text of a quoted string up to its closing quote (C escapes `\n \t \\ \"` read), and
/// what follows it.
pub(super) fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next().map(|(_, e)| e) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some(e) => return Err(format!("unknown escape \\{e}")),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err("the format's closing double quote is missing".into())
}

/// The widest width or precision taken (a damaged record's cannot ask for gigabytes).
const MAX_WIDTH: usize = 1024;

fn pieces(format: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            text.push('%');
            continue;
        }
        let mut conv = Conv {
            kind: Kind::Str,
            bits: 32,
            left: false,
            zero: false,
            alt: false,
            width: 0,
            precision: None,
        };
        while let Some(&f) = chars.peek() {
            match f {
                '-' => conv.left = true,
                '0' => conv.zero = true,
                '#' => conv.alt = true,
                _ => break,
            }
            chars.next();
        }
        // A `*` width or precision is an argument of its own, before the value's.
        let mut stars = Vec::new();
        let star = Conv { bits: 32, ..conv };
        let star = |kind| Conv { kind, ..star };
        if chars.next_if_eq(&'*').is_some() {
            stars.push(star(Kind::Width));
        }
        conv.width = number(&mut chars);
        if chars.next_if_eq(&'.').is_some() {
            if chars.next_if_eq(&'*').is_some() {
                stars.push(star(Kind::Precision));
            } else {
                conv.precision = Some(number(&mut chars));
            }
        }
        // The length modifier: l, ll, L, z, h or hh.
        let mut length = String::new();
        while let Some(&m) = chars.peek().filter(|m| matches!(m, 'l' | 'L' | 'z' | 'h')) {
            length.push(m);
            chars.next();
        }
        conv.bits = match length.as_str() {
            "" => 32,
            "l" | "ll" | "L" | "z" => 64,
            "h" => 16,
            "hh" => 8,
            _ => return Err(format!("%{length}: not a length modifier of C's printf")),
        };
        conv.kind = match chars.next() {
            Some('d' | 'i') => Kind::Signed,
            Some('u') => Kind::Unsigned,
            Some('x') => Kind::Hex { upper: false },
            Some('X') => Kind::Hex { upper: true },
            Some('o') => Kind::Octal,
            Some('c') if length.is_empty() => Kind::Char,
            Some('s') if length.is_empty() => Kind::Str,
            Some('p') if length.is_empty() => Kind::Pointer(pointer(&mut chars)?),
            Some(other) => {
                return Err(format!(
                    "%{length}{other} is not one of %d %i %u %x %X %c %s %p (with l or ll: %ld %lu %lx)"
                ));
            }
            None => return Err("the format ends inside a conversion".into()),
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.extend(stars.into_iter().map(Piece::Arg));
        pieces.push(Piece::Arg(conv));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// The decimal digits at the front of `chars` (none: 0), at most [`MAX_WIDTH`].
fn number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> usize {
    let mut n = 0;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        n = (n * 10 + d as usize).min(MAX_WIDTH);
        chars.next();
    }
    n
}

/// The kind of `%p` whose letters follow in `chars` (none: [`Ptr::Address`]); an error for
/// an extension of the kernel's not read here.
fn pointer(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Ptr, String> {
    let Some(&x) = chars.peek().filter(|c| c.is_ascii_alphanumeric()) else {
        return Ok(Ptr::Address);
    };
    chars.next();
    let ptr = match x {
        'S' => Ptr::Symbol { offset: true },
        's' => Ptr::Symbol { offset: false },
        'M' => Ptr::Mac,
        'U' => Ptr::Uuid,
        'I' => match chars.next() {
            Some('4') => Ptr::Ip4,
            Some('S') => {
                let (mut port, mut compressed) = (false, false);
                while let Some(&f) = chars.peek() {
                    match f {
                        'p' if !port => port = true,
                        'c' if !compressed => compressed = true,
                        _ => break,
                    }
                    chars.next();
                }
                Ptr::SockAddr { port, compressed }
            }
            Some('6') if chars.peek() == Some(&'c') => {
                chars.next();
                Ptr::Ip6 { compressed: true }
            }
            Some('6') => Ptr::Ip6 { compressed: false },
            _ => return Err("%pI: not %pI4, %pI6, %pI6c or %pIS".into()),
        },
        x => return Err(format!("%p{x}: the kernel's extension of %p")),
    };
    // What follows must not extend it further (%pI4h, %pISf).
    match chars.peek() {
        Some(c) if c.is_ascii_alphanumeric() => {
            Err(format!("%p{x}{c}: the kernel's extension of %p"))
        }
        _ => Ok(ptr),
    }
}

/// The argument as the conversion prints it, before padding.
fn convert(c: Conv, a: &Arg<'_>) -> String {
    let n = match a {
        Arg::Text(t) => return at_most(t, c.precision),
        Arg::Bytes(b) => return bytes(c, b),
        Arg::Number(n) => *n,
    };
    // The low `bits` bits, as C converts the argument to the conversion's type.
    let low = (n as u64) & (u64::MAX >> (64 - c.bits));
    let signed = {
        let shift = 64 - c.bits;
        ((low << shift) as i64) >> shift
    };
    // A sign or prefix, then digits, which a precision pads with zeros (`.0` of 0: none).
    let (front, digits) = match c.kind {
        Kind::Signed if signed < 0 => ("-", signed.unsigned_abs().to_string()),
        Kind::Signed => ("", signed.to_string()),
        Kind::Unsigned => ("", low.to_string()),
        Kind::Hex { upper } => {
            let prefix = if c.alt && low != 0 { "0x" } else { "" };
            (
                prefix,
                if upper {
                    format!("{low:X}")
                } else {
                    format!("{low:x}")
                },
            )
        }
        Kind::Octal if c.alt && low != 0 => ("0", format!("{low:o}")),
        Kind::Octal => ("", format!("{low:o}")),
        Kind::Pointer(_) if n == 0 => return "(nil)".into(),
        Kind::Pointer(_) => return format!("{:#x}", n as u64),
        Kind::Char => return char::from(n as u8).to_string(),
        Kind::Str => return at_most(&n.to_string(), c.precision),
        Kind::Width | Kind::Precision => return String::new(),
    };
    match c.precision {
        Some(0) if low == 0 => String::new(),
        Some(p) => format!("{front}{digits:0>p$}"),
        None => format!("{front}{digits}"),
    }
}

/// At most `precision` characters of `text` (all of it without one).
fn at_most(text: &str, precision: Option<usize>) -> String {
    match precision {
        Some(p) => text.chars().take(p).collect(),
        None => text.to_string(),
    }
}

/// An array's bytes as the conversion prints them: an address by `%pI4`, `%pI6`, `%pI6c`,
/// `%pM`; `?` where they are too few or the conversion prints no array.
fn bytes(c: Conv, b: &[u8]) -> String {
    let fixed = |n: usize| b.get(..n);
    match c.kind {
        Kind::Pointer(Ptr::Ip4) => fixed(4).map(ip4),
        Kind::Pointer(Ptr::Mac) => fixed(6).map(|m| {
            let hex: Vec<String> = m.iter().map(|x| format!("{x:02x}")).collect();
            hex.join(":")
        }),
        Kind::Pointer(Ptr::Ip6 { compressed }) => fixed(16).map(|a| ip6(a, compressed)),
        Kind::Pointer(Ptr::SockAddr { port, compressed }) => sockaddr(b, port, compressed),
        Kind::Pointer(Ptr::Uuid) => fixed(16).map(uuid),
        _ => None,
    }
    .unwrap_or_else(|| "?".into())
}

/// A `struct sockaddr` as `%pIS` prints it (libtraceevent's reading, which perf prints):
/// `None` where the bytes are too few for its family.
fn sockaddr(b: &[u8], port: bool, compressed: bool) -> Option<String> {
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    let family = u16::from_le_bytes([*b.first()?, *b.get(1)?]);
    let port_of = || u16::from_be_bytes([b[2], b[3]]);
    match family {
        AF_INET => {
            let addr = ip4(b.get(4..8)?);
            Some(if port {
                format!("{addr}:{}", port_of())
            } else {
                addr
            })
        }
        AF_INET6 => {
            let addr = ip6(b.get(8..24)?, compressed);
            Some(if port {
                format!("[{addr}]:{}", port_of())
            } else {
                addr
            })
        }
        _ => Some(String::new()),
    }
}

/// 16 bytes as a UUID: `0a1b2c3d-4e5f-...`, dashes after the 4th, 6th, 8th and 10th.
fn uuid(b: &[u8]) -> String {
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push_str(&format!("{x:02x}"));
    }
    out
}

fn ip4(a: &[u8]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// An IPv6 address as the kernel's `%pI6` (full) or `%pI6c` prints it: compressed, the
/// longest run of two or more zero groups as `::`, groups without leading zeros, and the last
/// 32 bits dotted for an IPv4-mapped or ISATAP address.
fn ip6(a: &[u8], compressed: bool) -> String {
    let group = |i: usize| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    if !compressed {
        let groups: Vec<String> = (0..8).map(|i| format!("{:04x}", group(i))).collect();
        return groups.join(":");
    }
    let v4_mapped = (0..5).all(|i| group(i) == 0) && group(5) == 0xffff;
    let isatap = (group(4) | 0x0200) == 0x0200 && group(5) == 0x5efe;
    let dotted = v4_mapped || isatap;
    let range = if dotted { 6 } else { 8 };
    // The longest run of zero groups (the first of equals), if two or more long.
    let (mut longest, mut at) = (1, None);
    for i in 0..range {
        let run = (i..range).take_while(|&j| group(j) == 0).count();
        if run > longest {
            (longest, at) = (run, Some(i));
        }
    }
    let mut out = String::new();
    let mut colon = false;
    let mut i = 0;
    while i < range {
        if Some(i) == at {
            if colon || i == 0 {
                out.push(':');
            }
            out.push(':');
            colon = false;
            i += longest;
            continue;
        }
        if colon {
            out.push(':');
        }
        out.push_str(&format!("{:x}", group(i)));
        colon = true;
        i += 1;
    }
    if dotted {
        if colon {
            out.push(':');
        }
        out.push_str(&ip4(&a[12..16]));
    }
    out
}

/// `text` padded to the conversion's width: right-aligned with spaces (or zeros after a
/// sign, for numbers with `0`), or left-aligned with `-`.
fn pad(out: &mut String, text: &str, c: Conv) {
    let n = text.chars().count();
    let fill = c.width.saturating_sub(n);
    if c.left {
        out.push_str(text);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if c.zero
        && c.precision.is_none()
        && c.kind.numeric()
        && !matches!(c.kind, Kind::Char | Kind::Pointer(_))
    {
        let (sign, digits) = match text.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", text),
        };
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(digits);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_c_does() {
        let p = Printf::parse(r#""%s wrote %d bytes\n", comm, count"#).unwrap();
        assert_eq!(p.args, ["comm", "count"]);
        assert_eq!(
            p.render(&[Arg::Text("dd".into()), Arg::Number(100)]),
            "dd wrote 100 bytes\n"
        );
        let p =
            Printf::parse(r#""%d %u %ld %lu %x %llx %c %% %-4s| %05d %3s", a,b,c,d,e,f,g,h,i,j"#)
                .unwrap();
        let args: Vec<Arg> = [
            Arg::Number(-2),
            Arg::Number(-2),
            Arg::Number(-2),
            Arg::Number(-2),
            Arg::Number(255),
            Arg::Number(-1),
            Arg::Number(65),
            Arg::Text("ab".into()),
            Arg::Number(-42),
            Arg::Number(7),
        ]
        .to_vec();
        assert_eq!(
            p.render(&args),
            "-2 4294967294 -2 18446744073709551614 ff ffffffffffffffff A % ab  | -0042   7"
        );
        // %d takes the low 32 bits, as C's printf of a long with %d.
        let p = Printf::parse(r#""%d %i", a, b"#).unwrap();
        assert_eq!(p.render(&[Arg::Number(1 << 32 | 5), Arg::Number(3)]), "5 3");
    }

    #[test]
    fn kernel_pointer_extensions_print_as_the_kernel_does() {
        let p = Printf::of_format("%pI4 %pM %p %p %pS").unwrap();
        let args = [
            Arg::Bytes(vec![10, 0, 0, 2].into()),
            Arg::Bytes(vec![0, 0x1b, 0x21, 0xa, 0xbc, 0xff].into()),
            Arg::Number(0),
            Arg::Number(0xffff_8881_8f75_00e0),
            Arg::Text("tcp_v4_rcv+0x91".into()),
        ];
        assert_eq!(
            p.render(&args),
            "10.0.0.2 00:1b:21:0a:bc:ff (nil) 0xffff88818f7500e0 tcp_v4_rcv+0x91"
        );
        let six = |groups: [u16; 8], compressed: bool| {
            let bytes: Vec<u8> = groups.iter().flat_map(|g| g.to_be_bytes()).collect();
            ip6(&bytes, compressed)
        };
        let mapped = [0, 0, 0, 0, 0, 0xffff, 0x7f00, 1];
        assert_eq!(six(mapped, true), "::ffff:127.0.0.1");
        assert_eq!(six([0; 8], true), "::");
        assert_eq!(six([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], true), "2001:db8::1");
        // The longest run, not the first; a single zero group stays.
        assert_eq!(six([0xfe80, 0, 0, 0, 1, 0, 0, 2], true), "fe80::1:0:0:2");
        assert_eq!(six([1, 0, 2, 3, 4, 5, 6, 7], true), "1:0:2:3:4:5:6:7");
        assert_eq!(
            six([0, 0, 0, 0, 0x0200, 0x5efe, 0x0a00, 1], true),
            "::200:5efe:10.0.0.1"
        );
        assert_eq!(
            six(mapped, false),
            "0000:0000:0000:0000:0000:ffff:7f00:0001"
        );
        // Too few bytes for the address: `?`.
        assert_eq!(
            Printf::of_format("%pI6c")
                .unwrap()
                .render(&[Arg::Bytes(vec![1, 2].into())]),
            "?"
        );
        // A sockaddr: its family (here's order), port (network order), address.
        let sa = |family: u16, port: u16, addr: &[u8]| {
            let mut b = vec![0u8; 28];
            b[..2].copy_from_slice(&family.to_le_bytes());
            b[2..4].copy_from_slice(&port.to_be_bytes());
            let at = if family == 2 { 4 } else { 8 };
            b[at..at + addr.len()].copy_from_slice(addr);
            Arg::Bytes(b.into())
        };
        let mut loopback6 = [0u8; 16];
        loopback6[15] = 1;
        let p = Printf::of_format("%pISpc %pIScp %pIS %pISc|%pISpc|").unwrap();
        let args = [
            sa(2, 9, &[127, 0, 0, 1]),
            sa(10, 46630, &loopback6),
            sa(2, 9, &[10, 1, 2, 3]),
            sa(10, 80, &loopback6),
            sa(0, 0, &[]),
        ];
        assert_eq!(p.render(&args), "127.0.0.1:9 [::1]:46630 10.1.2.3 ::1||");
        // Cut short: `?`.
        let short = Arg::Bytes(vec![10, 0, 0, 80, 0, 0, 0, 0, 0].into());
        assert_eq!(Printf::of_format("%pISpc").unwrap().render(&[short]), "?");
        // Extensions not read here are refused.
        for ext in ["%pUb", "%pISpf", "%pISpp", "%pI4h", "%pB", "%pI"] {
            assert!(Printf::of_format(ext).is_err(), "{ext}");
        }
    }

    /// Precisions, and widths and precisions taken from arguments (`*`), as C's printf takes
    /// them; a UUID's 16 bytes.
    #[test]
    fn precisions_and_star_widths_print_as_c_does() {
        let p = Printf::parse(r#""[%.3s|%.*s|%*d|%-*d|%.5d|%#.4x|%.0d|%08.3d|%.*s]", a, b, c, d, e, f, g, h, i, j, k, l, m"#)
            .unwrap();
        let n = |v: i128| Arg::Number(v);
        let t = |s: &'static str| Arg::Text(s.into());
        let args = [
            t("abcdef"),
            n(2),
            t("xyz"),
            n(5),
            n(42),
            n(4),
            n(7),
            n(-42),
            n(0x1f),
            n(0),
            n(5),
            n(-1),
            t("all"),
        ];
        assert_eq!(
            p.render(&args),
            "[abc|xy|   42|7   |-00042|0x001f||     005|all]"
        );
        // A star takes an argument of its own, which the error says.
        let err = Printf::parse(r#""%.*s", s"#).unwrap_err();
        assert!(
            err.contains("2 conversion(s), 1 of them for a * width or precision and 1 argument(s)"),
            "{err}"
        );
        let uuid: Vec<u8> = (0..16).collect();
        assert_eq!(
            Printf::of_format("%pU")
                .unwrap()
                .render(&[Arg::Bytes(uuid.into())]),
            "00010203-0405-0607-0809-0a0b0c0d0e0f"
        );
    }

    #[test]
    fn bad_formats_say_why() {
        let err = |s: &str| Printf::parse(s).unwrap_err();
        assert!(err("%d, count").contains("double quotes"));
        assert!(err(r#""%d"#).contains("closing double quote"));
        assert!(err(r#""%d %s", count"#).contains("2 conversion(s) and 1 argument(s)"));
        assert!(err(r#""%f", x"#).contains("%f is not one of"));
        assert!(err(r#""%lls", x"#).contains("%lls"));
        assert!(err(r#""%d" count"#).contains("expected a comma"));
        assert!(err(r#""%d %d", a,,"#).contains("argument 2 is empty"));
        assert!(err(r#""%"#).contains("closing"));
        assert!(err(r#""abc %""#).contains("ends inside"));
    }
}
