//! Tracepoint format files (`events/SYSTEM/NAME/format` in tracefs, and the same text in
//! TRACING_DATA): an event's id, its fields' names, offsets, sizes and kinds, and its print
//! format. What record compiles filters against and analyze decodes RAW payloads with.

/// How a field's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of `size` bytes (1, 2, 4 or 8), signed or not; pointers are integers too.
    Int,
    /// `char name[N]`: a NUL-padded string of `size` bytes.
    CharArray,
    /// Any other fixed array: `size` bytes.
    Array,
    /// `__data_loc TYPE[] name`: a u32 at `offset` giving the data's offset (low 16 bits)
    /// and length (high 16) from the record's start.
    DataLoc,
    /// `__rel_loc`: the same, the offset counted from the end of this field.
    RelLoc,
}

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The declared C type (`unsigned int`, `const char *`, `char[]` for __data_loc strings).
    pub type_name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

/// A field's value in one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Signed(i64),
    Unsigned(u64),
    /// A char array or a dynamic string, up to its first NUL.
    Str(String),
    /// Other arrays and dynamic data.
    Bytes(Vec<u8>),
}

impl Value {
    /// The value as a number (strings and bytes: none).
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::Signed(v) => Some(v as i128),
            Value::Unsigned(v) => Some(v as i128),
            _ => None,
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Signed(v) => write!(f, "{v}"),
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::Bytes(b) => {
                for (i, x) in b.iter().enumerate() {
                    write!(f, "{}{x:02x}", if i > 0 { " " } else { "" })?;
                }
                Ok(())
            }
        }
    }
}

impl Field {
    /// Whether the field is one of the common header's (`common_type`, `common_pid`, ...).
    pub fn is_common(&self) -> bool {
        self.name.starts_with("common_")
    }

    /// Whether it holds text (a char array or a dynamic `char[]`).
    pub fn is_string(&self) -> bool {
        match self.kind {
            FieldKind::CharArray => true,
            FieldKind::DataLoc | FieldKind::RelLoc => self.type_name.starts_with("char"),
            _ => false,
        }
    }

    /// The field's value in `raw` (a record as the kernel lays it out), or `None` if the
    /// record is too short for it (a damaged or truncated payload).
    pub fn value(&self, raw: &[u8]) -> Option<Value> {
        let bytes = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        let text = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        match self.kind {
            FieldKind::Int => {
                let mut v = [0u8; 8];
                let n = bytes.len().min(8);
                v[..n].copy_from_slice(&bytes[..n]);
                let u = u64::from_le_bytes(v);
                Some(if self.signed {
                    // Sign-extended from its n bytes (none, in a format that says size 0).
                    let shift = 64 - 8 * n as u32;
                    Value::Signed((u.checked_shl(shift).unwrap_or(0) as i64) >> shift.min(63))
                } else {
                    Value::Unsigned(u)
                })
            }
            FieldKind::CharArray => Some(Value::Str(text(bytes))),
            FieldKind::Array => Some(Value::Bytes(bytes.to_vec())),
            FieldKind::DataLoc | FieldKind::RelLoc => {
                let loc = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
                let mut start = (loc & 0xffff) as usize;
                if self.kind == FieldKind::RelLoc {
                    start += self.offset + self.size;
                }
                let len = (loc >> 16) as usize;
                let data = raw.get(start..start.checked_add(len)?)?;
                Some(if self.is_string() {
                    Value::Str(text(data))
                } else {
                    Value::Bytes(data.to_vec())
                })
            }
        }
    }
}

/// A parsed format file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceFormat {
    pub name: String,
    pub id: u64,
    /// Every field, the common ones first, in the file's order.
    pub fields: Vec<Field>,
    /// The text after `print fmt: `.
    pub print_fmt: String,
}

impl TraceFormat {
    /// Parses a format file's text. Lines it does not know are skipped, and so are field
    /// lines it cannot read (a newer kernel's syntax): the fields it read stay usable.
    pub fn parse(text: &str) -> Result<TraceFormat, String> {
        let mut f = TraceFormat::default();
        let mut id = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(name) = line.strip_prefix("name:") {
                f.name = name.trim().to_string();
            } else if let Some(v) = line.strip_prefix("ID:") {
                id = Some(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("bad ID line: {line}"))?,
                );
            } else if let Some(v) = line.strip_prefix("print fmt:") {
                f.print_fmt = v.trim().to_string();
            } else if line.starts_with("field:") {
                if let Ok(field) = parse_field(line) {
                    f.fields.push(field);
                }
            }
        }
        if f.name.is_empty() {
            return Err("no name: line".into());
        }
        f.id = id.ok_or("no ID: line")?;
        Ok(f)
    }

    /// The names the print format gives the values of field `name` through
    /// `__print_symbolic(REC->name, { 2, "NOT_SPECIFIED" }, ...)` (kfree_skb's drop reasons,
    /// tcp_send_reset's reset reasons): value -> name. Pairs whose value is not a number (a
    /// macro's name) are left out; none if the print format has no such table.
    pub fn symbols(&self, name: &str) -> std::collections::BTreeMap<u64, String> {
        let mut out = std::collections::BTreeMap::new();
        let head = format!("__print_symbolic(REC->{name},");
        let Some(at) = self.print_fmt.find(&head) else {
            return out;
        };
        let mut rest = &self.print_fmt[at + head.len()..];
        // Pairs until the table's closing parenthesis.
        loop {
            rest = rest.trim_start();
            let Some(pair) = rest.strip_prefix('{') else {
                break;
            };
            let Some(end) = pair.find('}') else {
                break;
            };
            let (value, text) = pair[..end].split_once(',').unwrap_or(("", ""));
            let text = text.trim().trim_matches('"');
            if let Ok(v) = value.trim().parse::<u64>() {
                out.insert(v, text.to_string());
            }
            rest = pair[end + 1..].trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r,
                None => break,
            }
        }
        out
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The fields after the common header.
    pub fn own_fields(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| !f.is_common())
    }

    /// Bytes of the record before its dynamic data: the end of the last field.
    pub fn fixed_size(&self) -> usize {
        self.fields
            .iter()
            .map(|f| f.offset + f.size)
            .max()
            .unwrap_or(0)
    }
}

/// `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:0|1;`
fn parse_field(line: &str) -> Result<Field, String> {
    let bad = || format!("cannot read field line: {line}");
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let (decl, offset, size) = (
        decl.ok_or_else(bad)?,
        offset.ok_or_else(bad)?,
        size.ok_or_else(bad)?,
    );
    let (kind_prefix, decl) = if let Some(d) = decl.strip_prefix("__data_loc ") {
        (Some(FieldKind::DataLoc), d)
    } else if let Some(d) = decl.strip_prefix("__rel_loc ") {
        (Some(FieldKind::RelLoc), d)
    } else {
        (None, decl)
    };
    // The name is the last word, without an array suffix; the type is what comes before
    // (with `[]` kept for dynamic arrays: `char[]`).
    let split = decl.rfind([' ', '*']).ok_or_else(bad)?;
    let (type_name, name) = (decl[..=split].trim(), decl[split + 1..].trim());
    let (name, array) = match name.split_once('[') {
        Some((n, _)) => (n, true),
        None => (name, false),
    };
    if name.is_empty() {
        return Err(bad());
    }
    let kind = match kind_prefix {
        Some(k) => k,
        None if array && type_name.ends_with("char") => FieldKind::CharArray,
        None if array => FieldKind::Array,
        None => FieldKind::Int,
    };
    Ok(Field {
        name: name.to_string(),
        type_name: type_name.to_string(),
        offset,
        size,
        signed,
        kind,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn print_symbolic_tables_give_names_by_value() {
        let f = super::TraceFormat {
            name: "kfree_skb".into(),
            print_fmt: "\"reason: %s state=%s\", __print_symbolic(REC->state, { TCP_CLOSE, \"TCP_CLOSE\" }), \
                        __print_symbolic(REC->reason, { 2, \"NOT_SPECIFIED\" }, { 12, \"NETFILTER_DROP\" }, { 13, \"OTHERHOST\" })"
                .into(),
            ..Default::default()
        };
        let r = f.symbols("reason");
        assert_eq!(r.len(), 3);
        assert_eq!(r[&12], "NETFILTER_DROP");
        assert!(f.symbols("state").is_empty(), "macro names are not numbers");
        assert!(f.symbols("protocol").is_empty());
    }

    use super::*;

    const EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:16;\tsize:16;\tsigned:0;
\tfield:const char * buf;\toffset:32;\tsize:8;\tsigned:0;

print fmt: \"filename=%s pid=%d\", __get_str(filename), REC->pid
";

    #[test]
    fn fields_and_values() {
        let f = TraceFormat::parse(EXEC).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_process_exec", 365));
        assert_eq!(f.fields.len(), 8);
        assert_eq!(f.own_fields().count(), 4);
        let filename = f.field("filename").unwrap();
        assert_eq!(filename.kind, FieldKind::DataLoc);
        assert!(filename.is_string());
        assert_eq!(f.field("comm").unwrap().kind, FieldKind::CharArray);
        let buf = f.field("buf").unwrap();
        assert_eq!(
            (buf.kind, buf.type_name.as_str()),
            (FieldKind::Int, "const char *")
        );
        assert_eq!(f.fixed_size(), 40);
        assert!(f.print_fmt.starts_with("\"filename=%s"));

        let mut raw = vec![0u8; 40];
        raw[0..2].copy_from_slice(&365u16.to_le_bytes());
        raw[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        raw[8..12].copy_from_slice(&(40u32 | 8 << 16).to_le_bytes());
        raw[12..16].copy_from_slice(&(-2i32).to_le_bytes());
        raw[16..19].copy_from_slice(b"dd\0");
        raw.extend_from_slice(b"/bin/ls\0");
        assert_eq!(
            f.field("common_pid").unwrap().value(&raw),
            Some(Value::Signed(-5))
        );
        assert_eq!(f.field("pid").unwrap().value(&raw), Some(Value::Signed(-2)));
        assert_eq!(
            f.field("common_type").unwrap().value(&raw),
            Some(Value::Unsigned(365))
        );
        assert_eq!(filename.value(&raw), Some(Value::Str("/bin/ls".into())));
        assert_eq!(
            f.field("comm").unwrap().value(&raw),
            Some(Value::Str("dd".into()))
        );
        // Short or lying payloads give no value, never a panic.
        assert_eq!(filename.value(&raw[..44]), None);
        assert_eq!(buf.value(&raw[..36]), None);
        raw[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(filename.value(&raw), None);
    }

    #[test]
    fn a_signed_field_of_no_bytes_reads_zero() {
        let f =
            TraceFormat::parse("name: x\nID: 1\n\tfield:int a;\toffset:0;\tsize:0;\tsigned:1;\n")
                .unwrap();
        assert_eq!(f.fields[0].value(&[1, 2]), Some(Value::Signed(0)));
    }

    #[test]
    fn unreadable_field_lines_are_skipped() {
        let f = TraceFormat::parse("name: x\nID: 1\n\tfield:int;\toffset:0;\tsize:4;\n").unwrap();
        assert!(f.fields.is_empty());
        assert!(parse_field("field:int;\toffset:0;\tsize:4;")
            .unwrap_err()
            .contains("field:int"));
        assert!(TraceFormat::parse("name: x\n").unwrap_err().contains("ID"));
    }
}
