//! kube's CEL format library (`library/format.go`, 1.31+): the named formats
//! `format.dns1123Label()`, `format.dns1123Subdomain()`, `format.dns1035Label()`,
//! `format.qualifiedName()`, their `...Prefix()` variants, `format.labelValue()`,
//! `format.uri()`, `format.uuid()`, `format.byte()`, `format.date()` and `format.datetime()`;
//! `format.named(name)`, an optional format; and `<format>.validate(string)`, `optional.none()`
//! when the string is valid, else the optional list of kube's error messages. Formats are
//! opaque `kubernetes.NamedFormat`s, equal when their names are.

use cel::common::types::{CelList, CelOptional, CelString, Kind, Type, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env};

use super::library::{arg, opaque_value, string_arg, take, Args, Returns};
use crate::machinery::schema::format_matches;
use crate::machinery::validation::{is_qualified_name, is_valid_label_value, NameRule};

/// `apiservercel.FormatType`.
pub(super) static FORMAT_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.NamedFormat");

/// One of kube's `ConstantFormats`: the key `format.named` takes, kube's `Name`, and its
/// validation (error messages, none when valid).
#[derive(Debug)]
pub(super) struct NamedFormat {
    key: &'static str,
    name: &'static str,
    validate: fn(&str) -> Vec<String>,
}

/// A `kubernetes.NamedFormat` value.
#[derive(Debug, Clone, Copy)]
pub(super) struct FormatVal(&'static NamedFormat);

impl PartialEq for FormatVal {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

opaque_value!(FormatVal, FORMAT_TYPE);

/// `strfmt`'s check of a CRD format, as one error message.
fn schema_format(format: &str, text: &str, message: &str) -> Vec<String> {
    if format_matches(format, text) == Some(true) {
        Vec::new()
    } else {
        vec![message.to_string()]
    }
}

static FORMATS: &[NamedFormat] = &[
    NamedFormat {
        key: "dns1123Label",
        name: "DNS1123Label",
        validate: |s| NameRule::Dns1123Label.validate(s, false),
    },
    NamedFormat {
        key: "dns1123Subdomain",
        name: "DNS1123Subdomain",
        validate: |s| NameRule::Dns1123Subdomain.validate(s, false),
    },
    NamedFormat {
        key: "dns1035Label",
        name: "DNS1035Label",
        validate: |s| NameRule::Dns1035Label.validate(s, false),
    },
    NamedFormat {
        key: "qualifiedName",
        name: "QualifiedName",
        validate: is_qualified_name,
    },
    NamedFormat {
        key: "dns1123LabelPrefix",
        name: "DNS1123LabelPrefix",
        validate: |s| NameRule::Dns1123Label.validate(s, true),
    },
    NamedFormat {
        key: "dns1123SubdomainPrefix",
        name: "DNS1123SubdomainPrefix",
        validate: |s| NameRule::Dns1123Subdomain.validate(s, true),
    },
    NamedFormat {
        key: "dns1035LabelPrefix",
        name: "DNS1035LabelPrefix",
        validate: |s| NameRule::Dns1035Label.validate(s, true),
    },
    NamedFormat {
        key: "labelValue",
        name: "LabelValue",
        validate: is_valid_label_value,
    },
    NamedFormat {
        key: "uri",
        name: "URI",
        // kube reports `url.ParseRequestURI`'s error itself.
        validate: |s| {
            super::net_url::parse_request_uri(s)
                .err()
                .into_iter()
                .collect()
        },
    },
    NamedFormat {
        key: "uuid",
        name: "uuid",
        validate: |s| schema_format("uuid", s, "does not match the UUID format"),
    },
    NamedFormat {
        key: "byte",
        name: "byte",
        validate: |s| schema_format("byte", s, "invalid base64"),
    },
    NamedFormat {
        key: "date",
        name: "date",
        validate: |s| schema_format("date", s, "invalid date"),
    },
    NamedFormat {
        key: "datetime",
        name: "datetime",
        validate: |s| schema_format("datetime", s, "invalid datetime"),
    },
];

fn named(key: &str) -> Option<&'static NamedFormat> {
    FORMATS.iter().find(|f| f.key == key)
}

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    // One zero-argument function per format; each is a plain `fn`, so they are spelled out.
    let constants: [(&str, cel::common::functions::Function); 13] = [
        ("format.dns1123Label", |_| constant("dns1123Label")),
        ("format.dns1123Subdomain", |_| constant("dns1123Subdomain")),
        ("format.dns1035Label", |_| constant("dns1035Label")),
        ("format.qualifiedName", |_| constant("qualifiedName")),
        ("format.dns1123LabelPrefix", |_| {
            constant("dns1123LabelPrefix")
        }),
        ("format.dns1123SubdomainPrefix", |_| {
            constant("dns1123SubdomainPrefix")
        }),
        ("format.dns1035LabelPrefix", |_| {
            constant("dns1035LabelPrefix")
        }),
        ("format.labelValue", |_| constant("labelValue")),
        ("format.uri", |_| constant("uri")),
        ("format.uuid", |_| constant("uuid")),
        ("format.byte", |_| constant("byte")),
        ("format.date", |_| constant("date")),
        ("format.datetime", |_| constant("datetime")),
    ];
    for (name, function) in constants {
        env.add_overload(name, name, vec![], function)?;
    }
    env.add_overload(
        "format.named",
        "format-named",
        vec![STRING_TYPE],
        format_named,
    )?;
    env.add_member_overload(
        "validate",
        "format-validate",
        FORMAT_TYPE.to_owned(),
        vec![STRING_TYPE],
        validate,
    )?;
    Ok(())
}

fn constant<'b, 'v>(key: &str) -> Returns<'b, 'v> {
    match named(key) {
        Some(format) => Ok(CowVal::owned(FormatVal(format))),
        None => Err(cel::ExecutionError::undeclared_reference(key)),
    }
}

fn format_named<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [key] = take(args)?;
    let found = named(string_arg("format.named", key.as_ref())?)
        .map(|f| Box::new(FormatVal(f)) as Box<dyn Val + 'v>);
    Ok(CowVal::owned(CelOptional::from(found)))
}

fn validate<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [format, text] = take(args)?;
    let format = arg::<FormatVal>("validate", format.as_ref())?.0;
    let errors = (format.validate)(string_arg("validate", text.as_ref())?);
    if errors.is_empty() {
        return Ok(CowVal::owned(CelOptional::none()));
    }
    let errors: Vec<Box<dyn Val + 'v>> = errors
        .into_iter()
        .map(|e| Box::new(CelString::from(e)) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelOptional::of(Box::new(CelList::from(
        errors,
    )))))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_format_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let errors = |expr: &str| eval(&format!("{expr}.value()"));
        let list = |items: &[&str]| {
            Ok(Value::List(std::sync::Arc::new(
                items.iter().map(|s| Value::from(*s)).collect(),
            )))
        };
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            ("!format.dns1123Label().validate('my-name').hasValue()", t(true)),
            ("format.dns1123Label().validate('My_Name').hasValue()", t(true)),
            ("!format.dns1123Subdomain().validate('a.b.c').hasValue()", t(true)),
            ("!format.dns1035Label().validate('abc-1').hasValue()", t(true)),
            ("format.dns1035Label().validate('1abc').hasValue()", t(true)),
            ("!format.qualifiedName().validate('example.com/Name').hasValue()", t(true)),
            ("!format.dns1123LabelPrefix().validate('my-name-').hasValue()", t(true)),
            ("format.dns1123Label().validate('my-name-').hasValue()", t(true)),
            ("!format.dns1123SubdomainPrefix().validate('a.b-').hasValue()", t(true)),
            ("!format.dns1035LabelPrefix().validate('a-').hasValue()", t(true)),
            ("!format.labelValue().validate('').hasValue() && format.labelValue().validate('-x').hasValue()", t(true)),
            ("!format.uri().validate('https://kube.io').hasValue()", t(true)),
            ("!format.uuid().validate('3b241101-e2bb-4255-8caf-4136c566a962').hasValue()", t(true)),
            ("!format.byte().validate('aGVsbG8=').hasValue()", t(true)),
            ("!format.date().validate('2024-02-29').hasValue()", t(true)),
            ("!format.datetime().validate('2024-02-29T10:00:00Z').hasValue()", t(true)),
            ("format.named('dns1123Label').hasValue() && !format.named('nope').hasValue()", t(true)),
            ("format.named('labelValue').value() == format.labelValue()", t(true)),
            ("format.uri() != format.uuid()", t(true)),
            ("format.named('uuid').value().validate('x') == format.uuid().validate('x')", t(true)),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
        let dns_label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        assert_eq!(
            errors("format.dns1123Label().validate('My_Name')"),
            list(&[dns_label])
        );
        assert_eq!(
            errors("format.uuid().validate('x')"),
            list(&["does not match the UUID format"])
        );
        assert_eq!(
            errors("format.byte().validate('!!')"),
            list(&["invalid base64"])
        );
        assert_eq!(
            errors("format.date().validate('2024-13-01')"),
            list(&["invalid date"])
        );
        assert_eq!(
            errors("format.datetime().validate('yesterday')"),
            list(&["invalid datetime"])
        );
        assert_eq!(
            errors("format.uri().validate('kube.io')"),
            list(&[r#"parse "kube.io": invalid URI for request"#])
        );
    }
}
