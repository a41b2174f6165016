/* lexer.c - tokens of the Relay text format (reference/relay-language.md 2.1), produced on demand.
 *
 * Quirks kept from TVM's tokenizer: a number token swallows '+', '-', '.', 'e' and 'E' (so
 * `1-1` is one malformed number; the printer writes `1 - 1`), and a run of leading '-' folds into
 * the literal that follows it. One deliberate difference: right after a '.' token a number is
 * plain digits, so that `%t.0.1` is two projections and not the float `0.1`. Dotted identifiers
 * such as `nn.conv2d` are one token. The lexer never recurses and never allocates. */
#include "frontend/text/lexer.h"

#include <stdbool.h>
#include <string.h>

void text_lex_init(Lexer *lx, const char *src, uint32_t len) {
    lx->src = src;
    lx->len = len;
    /* a UTF-8 byte order mark is not part of the text */
    lx->pos = len >= 3 && memcmp(src, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    lx->prev = TK_EOF;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c) || c == '/'; }

/* The byte at i, or 0 past the end (the text may contain NULs itself; callers compare i < len
 * before acting on a 0). */
static int at(const Lexer *lx, uint32_t i) { return i < lx->len ? (unsigned char)lx->src[i] : 0; }

static uint32_t skip_ident_chars(const Lexer *lx, uint32_t i) {
    while (i < lx->len && is_ident_char(at(lx, i)))
        i++;
    return i;
}

/* If `inf` or `nan` followed by a float suffix (`f`, `f16`, `bf16`, ...) starts at i and forms a
 * whole identifier, its end; else 0. */
static uint32_t match_inf_nan(const Lexer *lx, uint32_t i) {
    if (i + 3 > lx->len) return 0;
    const char *s = lx->src + i;
    if (memcmp(s, "inf", 3) != 0 && memcmp(s, "nan", 3) != 0) return 0;
    uint32_t j = i + 3;
    if (at(lx, j) == 'b') j++;
    if (at(lx, j) != 'f') return 0;
    j++;
    while (j < lx->len && is_digit(at(lx, j)))
        j++;
    if (j < lx->len && is_ident_char(at(lx, j))) return 0;
    return j;
}

/* A number body starting at a digit, then an optional suffix (`i`, `u`, `f` or `bf` with
 * digits). Validation is the parser's job. */
static uint32_t skip_number(const Lexer *lx, uint32_t i) {
    for (;;) {
        int c = at(lx, i);
        if (i < lx->len &&
            (is_digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
            i++;
        else
            break;
    }
    int c = at(lx, i);
    if (c == 'i' || c == 'u' || c == 'f')
        i++;
    else if (c == 'b' && at(lx, i + 1) == 'f')
        i += 2;
    else
        return i;
    while (i < lx->len && is_digit(at(lx, i)))
        i++;
    return i;
}

static TokKind keyword(const char *s, uint32_t n) {
    static const struct {
        const char *text;
        uint32_t len;
        TokKind kind;
    } kws[] = {
        {"let", 3, TK_LET},           {"fn", 2, TK_FN},
        {"def", 3, TK_DEF},           {"if", 2, TK_IF},
        {"else", 4, TK_ELSE},         {"type", 4, TK_TYPE},
        {"match", 5, TK_MATCH},       {"extern", 6, TK_EXTERN},
        {"free_var", 8, TK_FREE_VAR}, {"ref", 3, TK_REF},
        {"ref_read", 8, TK_REF_READ}, {"ref_write", 9, TK_REF_WRITE},
        {"True", 4, TK_TRUE},         {"False", 5, TK_FALSE},
    };
    if (n > 9) return TK_IDENT;
    for (size_t i = 0; i < sizeof kws / sizeof kws[0]; i++)
        if (kws[i].len == n && memcmp(kws[i].text, s, n) == 0) return kws[i].kind;
    return TK_IDENT;
}

/* Skips whitespace and comments. Returns false with *err_lo set when a block comment is not
 * closed (the lexer is then at the end of the input). */
static bool skip_space(Lexer *lx, uint32_t *err_lo) {
    for (;;) {
        uint32_t i = lx->pos;
        int c = at(lx, i);
        if (i >= lx->len) return true;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            lx->pos++;
        } else if (c == '/' && at(lx, i + 1) == '/') {
            while (lx->pos < lx->len && at(lx, lx->pos) != '\n')
                lx->pos++;
        } else if (c == '/' && at(lx, i + 1) == '*') {
            /* block comments nest: count depth instead of recursing */
            size_t depth = 1;
            uint32_t j = i + 2;
            while (depth > 0 && j < lx->len) {
                if (at(lx, j) == '/' && at(lx, j + 1) == '*' && j + 1 < lx->len) {
                    depth++;
                    j += 2;
                } else if (at(lx, j) == '*' && at(lx, j + 1) == '/' && j + 1 < lx->len) {
                    depth--;
                    j += 2;
                } else {
                    j++;
                }
            }
            lx->pos = j;
            if (depth > 0) {
                *err_lo = i;
                return false;
            }
        } else {
            return true;
        }
    }
}

static Token make(Lexer *lx, TokKind kind, uint32_t lo, uint32_t hi) {
    Token t = {(uint8_t)kind, 0, lo, hi};
    lx->pos = hi;
    lx->prev = (uint8_t)kind;
    return t;
}

static Token make_error(Lexer *lx, LexError e, uint32_t lo, uint32_t hi, uint32_t resume) {
    Token t = {TK_ERROR, (uint8_t)e, lo, hi};
    lx->pos = resume;
    lx->prev = TK_ERROR;
    return t;
}

Token text_lex_next(Lexer *lx) {
    uint32_t err_lo = 0;
    if (!skip_space(lx, &err_lo))
        return make_error(lx, LEX_ERR_COMMENT, err_lo, err_lo + 2, lx->len);
    uint32_t i = lx->pos;
    if (i >= lx->len) {
        Token t = {TK_EOF, 0, lx->len, lx->len};
        lx->prev = TK_EOF;
        return t;
    }
    int c = at(lx, i), c1 = at(lx, i + 1);

    if (is_digit(c)) {
        if (lx->prev == TK_DOT) { /* tuple index: plain digits */
            uint32_t j = i;
            while (j < lx->len && is_digit(at(lx, j)))
                j++;
            Token t = make(lx, TK_NUMBER, i, j);
            t.aux = 1;
            return t;
        }
        return make(lx, TK_NUMBER, i, skip_number(lx, i));
    }
    if (is_ident_start(c)) {
        uint32_t j = skip_ident_chars(lx, i);
        if (match_inf_nan(lx, i) == j) return make(lx, TK_NUMBER, i, j);
        TokKind k = keyword(lx->src + i, j - i);
        if (k == TK_MATCH && at(lx, j) == '?' && j < lx->len)
            return make(lx, TK_MATCH_PARTIAL, i, j + 1);
        if (k != TK_IDENT) return make(lx, k, i, j);
        while (at(lx, j) == '.' && j + 1 < lx->len && is_ident_start(at(lx, j + 1)))
            j = skip_ident_chars(lx, j + 1);
        return make(lx, TK_IDENT, i, j);
    }
    switch (c) {
    case '-': {
        uint32_t j = i;
        while (j < lx->len && at(lx, j) == '-')
            j++;
        if (j < lx->len && is_digit(at(lx, j))) return make(lx, TK_NUMBER, i, skip_number(lx, j));
        uint32_t e = match_inf_nan(lx, j);
        if (e != 0) return make(lx, TK_NUMBER, i, e);
        if (c1 == '>') return make(lx, TK_ARROW, i, i + 2);
        return make(lx, TK_MINUS, i, i + 1);
    }
    case '%': {
        uint32_t j = i + 1;
        int d = at(lx, j);
        if (j >= lx->len || !(is_ident_start(d) || is_digit(d)))
            return make_error(lx, LEX_ERR_SIGIL, i, i + 1, i + 1);
        bool all_digits = true;
        while (j < lx->len && is_ident_char(at(lx, j))) {
            all_digits = all_digits && is_digit(at(lx, j));
            j++;
        }
        return make(lx, all_digits ? TK_GRAPH : TK_LOCAL, i, j);
    }
    case '@': {
        uint32_t j = i + 1;
        int d = at(lx, j);
        if (j >= lx->len || !(is_ident_start(d) || is_digit(d)))
            return make_error(lx, LEX_ERR_SIGIL, i, i + 1, i + 1);
        return make(lx, TK_GLOBAL, i, skip_ident_chars(lx, j));
    }
    case '"': { /* escapes (\", \\, ...) are decoded by the parser; here they only hide a quote */
        uint32_t j = i + 1;
        while (j < lx->len && at(lx, j) != '"')
            j += at(lx, j) == '\\' && j + 1 < lx->len ? 2 : 1;
        if (j >= lx->len) return make_error(lx, LEX_ERR_STRING, i, i + 1, lx->len);
        return make(lx, TK_STRING, i, j + 1);
    }
    case '(': return make(lx, TK_LPAREN, i, i + 1);
    case ')': return make(lx, TK_RPAREN, i, i + 1);
    case '[': return make(lx, TK_LBRACKET, i, i + 1);
    case ']': return make(lx, TK_RBRACKET, i, i + 1);
    case '{': return make(lx, TK_LBRACE, i, i + 1);
    case '}': return make(lx, TK_RBRACE, i, i + 1);
    case ',': return make(lx, TK_COMMA, i, i + 1);
    case ';': return make(lx, TK_SEMI, i, i + 1);
    case ':': return make(lx, TK_COLON, i, i + 1);
    case '.': return make(lx, TK_DOT, i, i + 1);
    case '+': return make(lx, TK_PLUS, i, i + 1);
    case '*': return make(lx, TK_STAR, i, i + 1);
    case '/': return make(lx, TK_SLASH, i, i + 1);
    case '?': return make(lx, TK_QUESTION, i, i + 1);
    case '#': return make(lx, TK_HASH, i, i + 1);
    case '=':
        if (c1 == '=') return make(lx, TK_EQEQ, i, i + 2);
        if (c1 == '>') return make(lx, TK_FAT_ARROW, i, i + 2);
        return make(lx, TK_EQ, i, i + 1);
    case '!':
        if (c1 == '=') return make(lx, TK_NE, i, i + 2);
        break;
    case '<':
        if (c1 == '=') return make(lx, TK_LE, i, i + 2);
        return make(lx, TK_LT, i, i + 1);
    case '>':
        if (c1 == '=') return make(lx, TK_GE, i, i + 2);
        return make(lx, TK_GT, i, i + 1);
    default: break;
    }
    return make_error(lx, LEX_ERR_CHAR, i, i + 1, i + 1);
}

const char *text_lex_kind_name(TokKind k) {
    static const char *const names[TK_KIND_COUNT] = {
        [TK_EOF] = "end of input",
        [TK_ERROR] = "invalid token",
        [TK_IDENT] = "identifier",
        [TK_LOCAL] = "local variable",
        [TK_GRAPH] = "graph variable",
        [TK_GLOBAL] = "global variable",
        [TK_NUMBER] = "number",
        [TK_STRING] = "string",
        [TK_LET] = "'let'",
        [TK_FN] = "'fn'",
        [TK_DEF] = "'def'",
        [TK_IF] = "'if'",
        [TK_ELSE] = "'else'",
        [TK_TYPE] = "'type'",
        [TK_MATCH] = "'match'",
        [TK_MATCH_PARTIAL] = "'match?'",
        [TK_EXTERN] = "'extern'",
        [TK_FREE_VAR] = "'free_var'",
        [TK_REF] = "'ref'",
        [TK_REF_READ] = "'ref_read'",
        [TK_REF_WRITE] = "'ref_write'",
        [TK_TRUE] = "'True'",
        [TK_FALSE] = "'False'",
        [TK_LPAREN] = "'('",
        [TK_RPAREN] = "')'",
        [TK_LBRACKET] = "'['",
        [TK_RBRACKET] = "']'",
        [TK_LBRACE] = "'{'",
        [TK_RBRACE] = "'}'",
        [TK_COMMA] = "','",
        [TK_SEMI] = "';'",
        [TK_COLON] = "':'",
        [TK_DOT] = "'.'",
        [TK_EQ] = "'='",
        [TK_FAT_ARROW] = "'=>'",
        [TK_ARROW] = "'->'",
        [TK_EQEQ] = "'=='",
        [TK_NE] = "'!='",
        [TK_LT] = "'<'",
        [TK_LE] = "'<='",
        [TK_GT] = "'>'",
        [TK_GE] = "'>='",
        [TK_PLUS] = "'+'",
        [TK_MINUS] = "'-'",
        [TK_STAR] = "'*'",
        [TK_SLASH] = "'/'",
        [TK_QUESTION] = "'?'",
        [TK_HASH] = "'#'",
    };
    return (unsigned)k < TK_KIND_COUNT && names[k] ? names[k] : "token";
}
