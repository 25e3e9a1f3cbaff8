//! kube's CEL URL library (`library/urls.go`): `url(string)`, `isURL(string)` and the
//! methods `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath` and `getQuery`
//! (a map of string to list of strings). Values are opaque `kubernetes.URL`s; like kube, a
//! string must pass Go's `url.ParseRequestURI` (an absolute URI or path) and is then read with
//! `url.Parse` (so a fragment is not taken for part of the path or query).

use std::collections::HashMap;

use cel::common::types::{CelList, CelMap, CelMapKey, CelString, Kind, Type, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{
    arg, bool_val, failure, opaque_value, string_arg, string_val, take, Args, Returns,
};
use super::net_url::{self, Url};

/// `apiservercel.URLType`.
pub(super) static URL_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.URL");

/// A `kubernetes.URL` value.
#[derive(Debug, Clone)]
pub(super) struct UrlVal(Url);

/// kube's `URL.Equal`: the URLs print the same.
impl PartialEq for UrlVal {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_go_string() == other.0.to_go_string()
    }
}

opaque_value!(UrlVal, URL_TYPE);

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    let members: [(&str, &str, cel::common::functions::Function); 6] = [
        ("getScheme", "url_get_scheme", scheme),
        ("getHost", "url_get_host", host),
        ("getHostname", "url_get_hostname", hostname),
        ("getPort", "url_get_port", port),
        ("getEscapedPath", "url_get_escaped_path", escaped_path),
        ("getQuery", "url_get_query", query),
    ];
    for (name, id, function) in members {
        env.add_member_overload(name, id, URL_TYPE.to_owned(), vec![], function)?;
    }
    Ok(())
}

fn to_url<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    let raw = string_arg("url", text.as_ref())?;
    let parsed = net_url::parse_request_uri(raw)
        .and_then(|_| net_url::parse(raw))
        .map_err(|err| {
            failure(
                "url",
                format!("URL parse error during conversion from string: {err}"),
            )
        })?;
    Ok(CowVal::owned(UrlVal(parsed)))
}

fn is_url<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    bool_val(net_url::parse_request_uri(string_arg("isURL", text.as_ref())?).is_ok())
}

fn url<'a>(function: &str, val: &'a CowVal<'_, '_>) -> Result<&'a Url, ExecutionError> {
    Ok(&arg::<UrlVal>(function, val.as_ref())?.0)
}

fn scheme<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    string_val(url("getScheme", &u)?.scheme.clone())
}

fn host<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    string_val(url("getHost", &u)?.host())
}

fn hostname<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    string_val(url("getHostname", &u)?.hostname())
}

fn port<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    string_val(url("getPort", &u)?.port())
}

fn escaped_path<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    string_val(url("getEscapedPath", &u)?.escaped_path())
}

fn query<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [u] = take(args)?;
    let mut map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
    for (key, values) in url("getQuery", &u)?.query() {
        let values: Vec<Box<dyn Val + 'v>> = values
            .into_iter()
            .map(|v| Box::new(CelString::from(v)) as Box<dyn Val + 'v>)
            .collect();
        map.insert(CelMapKey::from(key), Box::new(CelList::from(values)));
    }
    Ok(CowVal::owned(CelMap::from(map)))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_url_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let s = |v: &str| Ok(Value::from(v));
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            ("isURL('https://kube.io') && isURL('/path') && isURL('mailto:x@y.io')", t(true)),
            ("isURL('kube.io') || isURL('') || isURL('../x')", t(false)),
            ("url('https://kube.io:443/a/b?x=1').getScheme()", s("https")),
            ("url('https://kube.io:443/a/b').getHost()", s("kube.io:443")),
            ("url('https://[::1]:80/').getHostname()", s("::1")),
            ("url('https://[::1]:80/').getPort()", s("80")),
            ("url('https://kube.io/').getPort()", s("")),
            ("url('https://kube.io/a%2Fb%20c').getEscapedPath()", s("/a%2Fb%20c")),
            ("url('/absolute/path').getHost()", s("")),
            ("url('https://kube.io/p#frag').getEscapedPath()", s("/p")),
            ("url('https://kube.io/?k=v1&k=v2&j=x').getQuery()['k'] == ['v1', 'v2']", t(true)),
            ("url('https://kube.io/?k=v1&k=v2&j=x').getQuery().size()", Ok(Value::Int(2))),
            ("url('https://kube.io/').getQuery() == {}", t(true)),
            ("url('https://kube.io') == url('https://kube.io') && url('https://a.io') != url('https://b.io')", t(true)),
            (
                "url('kube.io')",
                Err(r#"URL parse error during conversion from string: parse "kube.io": invalid URI for request"#.into()),
            ),
            (
                "url('https://a b/')",
                Err(r#"URL parse error during conversion from string: parse "https://a b/": invalid character " " in host name"#.into()),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
