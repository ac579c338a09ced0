//! perf's tracepoint filter language, read into a tree: `FIELD OP VALUE` predicates joined by
//! `&&` (binding tighter) and `||`, negated by `!`, grouped by parentheses. OP is one of `==
//! != < <= > >= & ~`; VALUE a number (decimal, `0x` hex, `0` octal, negative), a string in
//! double or single quotes, or an unquoted word (a string, as the kernel takes it).

use super::error::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Pred(Pred),
}

/// `field op value`, with the column (1-based, in characters) of each part for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pred {
    pub field: String,
    pub field_col: usize,
    pub op: Op,
    pub op_col: usize,
    pub value: Value,
    pub value_col: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    BitAnd,
    Glob,
}

impl Op {
    pub fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::BitAnd => "&",
            Op::Glob => "~",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A number (its 64 bits: a negative number or one above i64::MAX alike) and its text
    /// (a string field takes the text).
    Number(i64, String),
    /// A quoted string, or a word that is not a number.
    Str(String),
}

/// Parses a whole filter expression.
pub fn parse(text: &str) -> Result<Expr, Error> {
    let mut p = Parser {
        chars: text.chars().collect(),
        at: 0,
    };
    p.skip_space();
    if p.peek().is_none() {
        return Err(p.error_here("the filter is empty"));
    }
    let e = p.or()?;
    p.skip_space();
    match p.peek() {
        None => Ok(e),
        Some(')') => Err(p.error_here("')' without its '('")),
        Some(_) => Err(p.error_here("expected '&&', '||' or the end of the filter")),
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek2(&self) -> Option<char> {
        self.chars.get(self.at + 1).copied()
    }

    fn column(&self) -> usize {
        self.at + 1
    }

    fn error_here(&self, message: impl Into<String>) -> Error {
        Error {
            column: self.column(),
            message: message.into(),
        }
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// Consumes `s` if it comes next (after spaces).
    fn eat(&mut self, s: &str) -> bool {
        self.skip_space();
        let n = s.chars().count();
        if self.chars.len() >= self.at + n
            && self.chars[self.at..self.at + n]
                .iter()
                .copied()
                .eq(s.chars())
        {
            self.at += n;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, Error> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, Error> {
        let mut e = self.unary()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        self.skip_space();
        match self.peek() {
            Some('!') if self.peek2() != Some('=') => {
                self.at += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some('(') => {
                let open = self.column();
                self.at += 1;
                let e = self.or()?;
                self.skip_space();
                match self.peek() {
                    Some(')') => {
                        self.at += 1;
                        Ok(e)
                    }
                    None => Err(Error {
                        column: open,
                        message: "this '(' is never closed".into(),
                    }),
                    Some(_) => Err(self.error_here("expected '&&', '||' or ')'")),
                }
            }
            None => Err(self.error_here("expected a condition (FIELD OP VALUE) at the end")),
            Some(_) => Ok(Expr::Pred(self.pred()?)),
        }
    }

    fn pred(&mut self) -> Result<Pred, Error> {
        let field_col = self.column();
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.at += 1;
        }
        let field: String = self.chars[start..self.at].iter().collect();
        if field.is_empty() || field.starts_with(|c: char| c.is_ascii_digit()) {
            self.at = start;
            return Err(self.error_here("expected a field name"));
        }
        self.skip_space();
        let op_col = self.column();
        let op = self.op().ok_or_else(|| {
            self.error_here(format!(
                "expected an operator (== != < <= > >= & ~) after '{field}'"
            ))
        })?;
        self.skip_space();
        let value_col = self.column();
        let value = self.value(op)?;
        Ok(Pred {
            field,
            field_col,
            op,
            op_col,
            value,
            value_col,
        })
    }

    fn op(&mut self) -> Option<Op> {
        let two = |p: &Self, c| p.peek2() == Some(c);
        let (op, n) = match self.peek()? {
            '=' if two(self, '=') => (Op::Eq, 2),
            '!' if two(self, '=') => (Op::Ne, 2),
            '<' if two(self, '=') => (Op::Le, 2),
            '>' if two(self, '=') => (Op::Ge, 2),
            '<' => (Op::Lt, 1),
            '>' => (Op::Gt, 1),
            '&' if !two(self, '&') => (Op::BitAnd, 1),
            '~' => (Op::Glob, 1),
            _ => return None,
        };
        self.at += n;
        Some(op)
    }

    fn value(&mut self, op: Op) -> Result<Value, Error> {
        let missing = |p: &Self| p.error_here(format!("expected a value after '{}'", op.text()));
        match self.peek() {
            None => Err(missing(self)),
            Some(q @ ('"' | '\'')) => {
                let open = self.column();
                self.at += 1;
                let start = self.at;
                while self.peek().is_some_and(|c| c != q) {
                    self.at += 1;
                }
                if self.peek().is_none() {
                    return Err(Error {
                        column: open,
                        message: format!("this string is never closed (no {q} after it)"),
                    });
                }
                let s = self.chars[start..self.at].iter().collect();
                self.at += 1;
                Ok(Value::Str(s))
            }
            Some(c) if "=!<>&|()~".contains(c) => Err(missing(self)),
            Some(_) => {
                let col = self.column();
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && !"()&|=!<>~\"'".contains(c))
                {
                    self.at += 1;
                }
                let word: String = self.chars[start..self.at].iter().collect();
                if word.starts_with(|c: char| c.is_ascii_digit())
                    || (word.starts_with(['-', '+'])
                        && word[1..].starts_with(|c: char| c.is_ascii_digit()))
                {
                    number(&word)
                        .map(|n| Value::Number(n, word.clone()))
                        .ok_or(Error {
                            column: col,
                            message: format!(
                                "'{word}' is not a number (decimal, 0x hex or 0 octal, in 64 bits)"
                            ),
                        })
                } else {
                    Ok(Value::Str(word))
                }
            }
        }
    }
}

/// A number as the kernel's filters read one (kstrtoll/kstrtoull, base 0): its 64 bits.
fn number(word: &str) -> Option<i64> {
    match word.strip_prefix('-') {
        Some(digits) => {
            let v = crate::tracing::spec::parse_u64(digits)?;
            (v <= i64::MAX as u64 + 1).then(|| (v as i64).wrapping_neg())
        }
        None => crate::tracing::spec::parse_u64(word.strip_prefix('+').unwrap_or(word))
            .map(|v| v as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pred(field: &str, op: Op, value: Value) -> Expr {
        Expr::Pred(Pred {
            field: field.into(),
            field_col: 0,
            op,
            op_col: 0,
            value,
            value_col: 0,
        })
    }

    /// The tree with columns zeroed, to compare shapes.
    fn shape(e: Expr) -> Expr {
        match e {
            Expr::Or(a, b) => Expr::Or(Box::new(shape(*a)), Box::new(shape(*b))),
            Expr::And(a, b) => Expr::And(Box::new(shape(*a)), Box::new(shape(*b))),
            Expr::Not(a) => Expr::Not(Box::new(shape(*a))),
            Expr::Pred(p) => pred(&p.field, p.op, p.value),
        }
    }

    fn n(v: i64, t: &str) -> Value {
        Value::Number(v, t.into())
    }

    #[test]
    fn precedence_and_grouping() {
        let a = || pred("a", Op::Eq, n(1, "1"));
        let b = || pred("b", Op::Eq, n(2, "2"));
        let c = || pred("c", Op::Eq, n(3, "3"));
        let bx = Box::new;
        assert_eq!(
            shape(parse("a == 1 || b == 2 && c == 3").unwrap()),
            Expr::Or(bx(a()), bx(Expr::And(bx(b()), bx(c()))))
        );
        assert_eq!(
            shape(parse("(a==1||b==2)&&c==3").unwrap()),
            Expr::And(bx(Expr::Or(bx(a()), bx(b()))), bx(c()))
        );
        assert_eq!(
            shape(parse("!(a == 1) && !!b == 2").unwrap()),
            Expr::And(
                bx(Expr::Not(bx(a()))),
                bx(Expr::Not(bx(Expr::Not(bx(b())))))
            )
        );
        // Left to right.
        assert_eq!(
            shape(parse("a == 1 || b == 2 || c == 3").unwrap()),
            Expr::Or(bx(Expr::Or(bx(a()), bx(b()))), bx(c()))
        );
    }

    #[test]
    fn operators_and_values() {
        let one = |s| match shape(parse(s).unwrap()) {
            Expr::Pred(p) => (p.op, p.value),
            e => panic!("{e:?}"),
        };
        assert_eq!(one("x==1"), (Op::Eq, n(1, "1")));
        assert_eq!(one("x != -1"), (Op::Ne, n(-1, "-1")));
        assert_eq!(one("x<0x10"), (Op::Lt, n(16, "0x10")));
        assert_eq!(one("x <= 010"), (Op::Le, n(8, "010")));
        assert_eq!(
            one("x > 0xffffffffffffffff"),
            (Op::Gt, n(-1, "0xffffffffffffffff"))
        );
        assert_eq!(
            one("x >= -9223372036854775808"),
            (Op::Ge, n(i64::MIN, "-9223372036854775808"))
        );
        assert_eq!(one("x & 4"), (Op::BitAnd, n(4, "4")));
        assert_eq!(one("x == +4"), (Op::Eq, n(4, "+4")));
        assert_eq!(one("comm ~ \"ba*\""), (Op::Glob, Value::Str("ba*".into())));
        assert_eq!(one("comm == 'a b'"), (Op::Eq, Value::Str("a b".into())));
        assert_eq!(one("comm == bash"), (Op::Eq, Value::Str("bash".into())));
        assert_eq!(one("comm==*sh"), (Op::Eq, Value::Str("*sh".into())));
    }

    #[test]
    fn columns() {
        let Expr::And(a, b) = parse("pid == 1 && comm ~ 'x'").unwrap() else {
            panic!()
        };
        let (Expr::Pred(a), Expr::Pred(b)) = (*a, *b) else {
            panic!()
        };
        assert_eq!((a.field_col, a.op_col, a.value_col), (1, 5, 8));
        assert_eq!((b.field_col, b.op_col, b.value_col), (13, 18, 20));
    }

    #[test]
    fn errors_say_where() {
        for (text, column, says) in [
            ("count >> 3", 8, "expected a value after '>'"),
            ("", 1, "empty"),
            ("   ", 4, "empty"),
            ("count", 6, "expected an operator"),
            ("count = 3", 7, "expected an operator"),
            ("count == ", 10, "expected a value after '=='"),
            ("count == 3 &&", 14, "expected a condition"),
            ("count == 3 & 4", 12, "expected '&&', '||' or the end"),
            ("(count == 3", 1, "never closed"),
            ("count == 3)", 11, "without its '('"),
            ("(a == 1 b == 2)", 9, "expected '&&', '||' or ')'"),
            ("== 3", 1, "expected a field name"),
            ("3 == 3", 1, "expected a field name"),
            ("comm == \"bash", 9, "never closed"),
            ("x == 0x", 6, "not a number"),
            ("x == 08", 6, "not a number"),
            ("x == 99999999999999999999", 6, "not a number"),
            ("x == -9223372036854775809", 6, "not a number"),
            ("x && y", 3, "expected an operator"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.column, column, "{text}: {e:?}");
            assert!(e.message.contains(says), "{text}: {e:?}");
        }
    }
}
