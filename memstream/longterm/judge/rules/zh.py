"""The Chinese grammar of the rule-based judge: first-person statements rewritten in the third
person ("我住在上海" -> "用户住在上海"). Rules are tried in order; the first that yields a hit
wins."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import Handler, Hit, Rule, boost, clean, first_hit, hit
from memstream.longterm.models import Category

_ZH_NUM = r"[一二三四五六七八九十两〇零]"
_DATE_ZH = (
    r"(?:大后天|后天|明天(?:早上|上午|中午|下午|晚上)?|明早|明晚|今晚|今天晚上|今天下午|"
    r"下下?(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]?|这(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]|"
    r"本周末|周末|下个?月(?:初|底|中)?|明年(?:初|底|春天|夏天|秋天|冬天)?|下半年|年底|月底|"
    r"\d{1,2}月\d{1,2}[日号]|" + _ZH_NUM + r"{1,3}月" + _ZH_NUM + r"{1,3}[日号]|"
    r"\d{4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{4}-\d{2}-\d{2}|\d{1,2}月(?:份|初|底)?|"
    + _ZH_NUM
    + r"{1,2}月(?:份|初|底)?|(?:今年|明年)?(?:春节|国庆|五一|寒假|暑假|圣诞节?|中秋)|"
    r"(?:周|星期|礼拜)[一二三四五六日天]|过几天|过两天|几天后|(?<!\d)\d+天后)"
)
_HAS_DATE_ZH = re.compile(_DATE_ZH)
_LEADING_DATE_ZH = re.compile(rf"^(?P<date>{_DATE_ZH})[，,\s]*(?P<rest>我.*)$")
_FILLER_ZH = re.compile(
    r"^(?:(?:嗯|哦|噢|啊|对|对了|是的|好的|好|另外|还有|而且|并且|但是|但|不过|所以|其实|顺便说一下|"
    r"顺便说|顺便|说实话|老实说|你知道吗|那个|然后|也)[，,、\s]*)+"
)
_QUESTION_ZH = re.compile(
    r"(?:什么|哪里|哪儿|怎么|为什么|为啥|谁|多少|哪个|哪些|几点|是不是|有没有|能不能|可不可以|"
    r"要不要|会不会|好不好|对不对|行不行)(?![都也])"
)
_QUESTION_END_ZH = re.compile(r"[吗呢么嘛]\s*$")
_HYPOTHETICAL_ZH = re.compile(r"如果|假如|要是|假设|万一|的话|假若|倘若|若是")
_REL_ZH = (
    r"(?:男朋友|女朋友|男友|女友|未婚妻|未婚夫|妻子|老婆|太太|爱人|丈夫|老公|对象|儿子|女儿|孩子|宝宝|"
    r"妈妈|母亲|老妈|爸爸|父亲|老爸|父母|哥哥|姐姐|弟弟|妹妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|叔叔|"
    r"阿姨|舅舅|表哥|表姐|表弟|表妹|堂哥|堂姐|堂弟|堂妹|好朋友|朋友|闺蜜|室友|同学|老板|领导|上司|"
    r"同事|小狗|小猫|狗狗|猫咪|狗|猫|宠物)"
)
_CLOSE_REL_ZH = re.compile(
    r"^(?:男朋友|女朋友|男友|女友|未婚|妻子|老婆|太太|爱人|丈夫|老公|对象|儿子|女儿|孩子|宝宝)"
)
_FAMILY_REL_ZH = re.compile(
    r"^(?:妈妈|母亲|老妈|爸爸|父亲|老爸|父母|哥哥|姐姐|弟弟|妹妹|爷爷|奶奶|外|姥|小狗|小猫|狗|猫|宠物)"
)
_HAS_REL_ZH = re.compile(_REL_ZH)
# A comma-separated piece that starts a clause of its own (the subject may be omitted).
_ZH_CLAUSE_START = re.compile(
    r"^(?:我|而且|并且|但是|另外|以后|今后|从现在开始|请|不要|别|叫我|今年|现在住在|住在|来自|"
    r"在\S{1,12}(?:工作|上班|上学)|喜欢|不喜欢|讨厌|是一名|是一个|是一位|有一|养了|打算|计划|准备|"
    r"明天|下周|下个月|明年|(?:昨天|前天|上周|上个月|去年|最近)我)"
)
_ZH_SUBJECTLESS = re.compile(
    r"^(?:今年|现在住在|住在|来自|在\S{1,12}(?:工作|上班|上学)|喜欢|不喜欢|讨厌|是一名|是一个|是一位|"
    r"有一|养了|打算|计划|准备)"
)


def _third_zh(text: str, *, instruction: bool = False) -> str:
    text = clean(text)
    if instruction:
        text = text.replace("你的", "助手的").replace("你们", "助手").replace("你", "助手")
        return text.replace("我们", "用户").replace("我的", "用户的").replace("我", "用户")
    return text.replace("我们", "他们").replace("我的", "自己的").replace("我", "自己")


def _useful_zh(text: str) -> bool:
    text = clean(text)
    return len(text) >= 1 and text not in (
        "它",
        "这个",
        "那个",
        "这",
        "那",
        "你",
        "他",
        "她",
        "这样",
        "那样",
    )


def _zh(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _zh_hit(core: str, category: Category, importance: int) -> Hit:
    return hit(core, category, importance, zh=True)


def _zh_fact(template: str, importance: int) -> Handler:
    """The handler of a personal fact that writes the capture ``x`` into ``template``."""

    def handler(m: re.Match[str], depth: int) -> Hit | None:
        x = clean(m.group("x"))
        if not x:
            return None
        return _zh_hit(template.format(x=_third_zh(x)), "personal_fact", importance)

    return handler


def _zh_remember(m: re.Match[str], depth: int) -> Hit | None:
    inner = m.group("x")
    if depth < 2:
        found = _zh_clause(inner, depth + 1)
        if found is not None:
            return boost(found)
    if not _useful_zh(inner):
        return None
    return _zh_hit(f"用户希望助手记住{_third_zh(inner, instruction=True)}", "instruction", 8)


def _zh_from_now_on(m: re.Match[str], depth: int) -> Hit | None:
    inner = re.sub(r"^(?:请|你要|你得|你应该|麻烦)+", "", m.group("x").strip("，, "))
    if depth < 2:
        found = _zh_clause(inner, depth + 1)
        if found is not None:
            return boost(found)
    if not _useful_zh(inner) or inner.startswith("我"):
        return None
    return _zh_hit(f"用户希望以后{_third_zh(inner, instruction=True)}", "instruction", 9)


def _zh_call_me(m: re.Match[str], depth: int) -> Hit | None:
    name = re.sub(r"(?:就好|就行|就可以|吧|好了|好吗)$", "", clean(m.group("x")))
    if not name or len(name) > 12:
        return None
    return _zh_hit(f"用户希望被称为{name}", "instruction", 8)


def _zh_name(m: re.Match[str], depth: int) -> Hit | None:
    name = clean(m.group("x"))
    if not name or len(name) > 12 or re.match(r"^(?:了|过|他|她|它|你|人|车|外卖|醒|错|好)", name):
        return None
    return _zh_hit(f"用户叫{name}", "personal_fact", 9)


def _zh_answer_in(m: re.Match[str], depth: int) -> Hit | None:
    lang = clean(m.group("x"))
    if not lang or len(lang) > 20:
        return None
    verb = m.group("verb")
    always = m.group("always") or ""
    word = "总是" if always and always != "都" else ""
    return _zh_hit(f"用户希望助手{word}用{lang}{verb}", "instruction", 8 + (1 if always else 0))


def _zh_always(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful_zh(x):
        return None
    return _zh_hit(f"用户希望助手总是{_third_zh(x, instruction=True)}", "instruction", 9)


_ZH_SMALL_TALK_NEG = re.compile(r"^(?:客气|担心|谢|着急|紧张|在意|介意|急|怕|难过|生气|麻烦了|了)")


def _zh_dont(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or _ZH_SMALL_TALK_NEG.match(x):
        return None
    please = 1 if m.group("please") else 0
    return _zh_hit(f"用户希望助手不要{_third_zh(x, instruction=True)}", "instruction", 8 + please)


def _zh_answer_style(m: re.Match[str], depth: int) -> Hit | None:
    x = re.sub(r"^(?:请|务必)+", "", m.group("x"))
    return _zh_hit(f"用户希望{m.group('what')}{_third_zh(x, instruction=True)}", "instruction", 8)


def _zh_favourite(m: re.Match[str], depth: int) -> Hit | None:
    thing, value = clean(m.group("thing")), clean(m.group("x"))
    if not thing or not value:
        return None
    return _zh_hit(f"用户最喜欢的{_third_zh(thing)}是{_third_zh(value)}", "preference", 6)


def _zh_dislike(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or "你" in x:
        return None
    verb = m.group("verb")
    word = "讨厌" if verb in ("讨厌", "很讨厌") else "受不了" if verb == "受不了" else "不喜欢"
    importance = 7 if word in ("讨厌", "受不了") or m.group("adv") else 6
    return _zh_hit(f"用户{m.group('when')}{word}{_third_zh(x)}", "preference", importance)


def _zh_like(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or "你" in x or x.startswith(("的", "上了你")):
        return None
    verb = m.group("verb")
    importance = 7 if verb in ("爱", "热爱") or m.group("adv") else 6
    category: Category = "preference"
    if re.search(r"回答|回复|答案|解释|列表|要点|表格|简短|简洁|详细", x):
        category, importance = "instruction", importance + 2
    return _zh_hit(f"用户{m.group('when')}{verb}{_third_zh(x)}", category, importance)


def _zh_fan(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户是{_third_zh(x)}的粉丝", "preference", 6)


def _zh_diet(m: re.Match[str], depth: int) -> Hit | None:
    what = m.group("x")
    if what.startswith("不吃") or what.startswith("不能吃") or what.startswith("不喝"):
        rest = clean(what)
        if len(rest) <= 2:
            return None
        return _zh_hit(f"用户{_third_zh(rest)}", "personal_fact", 7)
    return _zh_hit(f"用户{clean(what)}", "personal_fact", 8)


def _zh_age(m: re.Match[str], depth: int) -> Hit | None:
    return _zh_hit(f"用户今年{m.group('n')}岁", "personal_fact", 7)


def _zh_moved(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or x in ("家",):
        return None
    origin = m.group("a")
    source = f"从{_third_zh(origin)}" if origin else ""
    return _zh_hit(f"用户{source}搬到了{_third_zh(x)}", "personal_fact", 8)


def _zh_work(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户在{_third_zh(x)}{m.group('verb')}", "personal_fact", 8)


def _zh_work_as(m: re.Match[str], depth: int) -> Hit | None:
    x, y = clean(m.group("x")), clean(m.group("y"))
    if not x or not y or "你" in x + y or len(y) > 30:
        return None
    return _zh_hit(f"用户在{_third_zh(x)}{m.group('verb')}{_third_zh(y)}", "personal_fact", 8)


def _zh_my_thing(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户的{m.group('thing')}{m.group('verb')}{_third_zh(x)}", "personal_fact", 7)


def _zh_speak(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x or len(x) > 30 or re.match(r"^(?:话|什么|不|错|过)", x):
        return None
    return _zh_hit(f"用户会说{_third_zh(x)}", "personal_fact", 6)


def _zh_study(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x or len(x) > 30:
        return None
    if m.group("major"):
        return _zh_hit(f"用户的专业是{_third_zh(x)}", "personal_fact", 7)
    return _zh_hit(f"用户在学习{_third_zh(x)}", "personal_fact", 6)


_ZH_IS_EXCLUDE = re.compile(
    r"^(?:说|不是|在|从|来|想|觉得|的|因为|为了|要|个好|这样|那样|真的|挺|很|不|这么|那么|问|随便|"
    r"开玩笑|认真|故意|刚|自己|你|对|错)"
)


def _zh_is(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or _ZH_IS_EXCLUDE.match(x) or "你" in x or len(x) > 40:
        return None
    measure = m.group("measure") or ""
    return _zh_hit(f"用户是{measure}{_third_zh(x)}", "personal_fact", 7)


_ZH_HAVE_EXCLUDE = re.compile(
    r"^(?:点|一点|些|一些|个问题|一个问题|问题|事|空|时间|没有|疑问|个想法|一个想法|想法|个建议|"
    r"一个建议|建议|个请求|一个请求|件事|一件事|机会|可能|必要|道理|意思|兴趣|印象|感觉|办法|"
    r"数|把握|信心)"
)


def _zh_have(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or _ZH_HAVE_EXCLUDE.match(x) or "你" in x:
        return None
    verb = m.group("verb")
    verb = "养了" if verb.startswith("养") else "有"
    text = f"用户{verb}{_third_zh(x)}"
    if _HAS_DATE_ZH.search(x):
        return _zh_hit(text, "plan", 5)
    if _HAS_REL_ZH.search(x):
        return _zh_hit(text, "relationship", 6)
    if re.search(r"病|过敏|症|哮喘|残疾", x):
        return _zh_hit(text, "personal_fact", 8)
    return _zh_hit(text, "personal_fact", 6)


def _zh_relationship(m: re.Match[str], depth: int) -> Hit | None:
    rest = clean(m.group("rest"))
    if len(rest) < 2 or "你" in rest:
        return None
    rel = m.group("rel")
    importance = 7 if _CLOSE_REL_ZH.match(rel) else 6 if _FAMILY_REL_ZH.match(rel) else 5
    if re.match(r"^(?:叫|名叫|的名字)", rest):
        importance += 1
    return _zh_hit(f"用户的{rel}{_third_zh(rest)}", "relationship", importance)


_ZH_CHAT_ACTION = re.compile(r"^(?:问|说|知道|了解|请教|确认|看看|试试|想想|告诉|回答|解释)")


def _zh_plan(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    date = (m.group("d1") or "") + (m.group("d2") or "")
    verb = m.group("verb")
    dated = bool(date) or bool(_HAS_DATE_ZH.search(x))
    if not _useful_zh(x) or "你" in x or _ZH_CHAT_ACTION.match(x):
        return None
    if verb in ("想", "想要"):
        if not dated and not re.match(r"^(?:学|去|考|成为|换|搬|开始|买|参加|报名|旅行|旅游)", x):
            return None
        word = "想"
    elif verb in ("要", "将要", "将", "会"):
        if not dated:
            return None
        word = "打算"
    else:
        word = verb.removeprefix("正")
    importance = 4 + (1 if verb in ("打算", "计划", "正打算") else 0) + (2 if dated else 0)
    return _zh_hit(f"用户{word}{date}{_third_zh(x)}", "plan", importance)


def _zh_dated(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    date = (m.group("d1") or "") + (m.group("d2") or "")
    if not date or not _useful_zh(x) or "你" in x or _ZH_CHAT_ACTION.match(x):
        return None
    return _zh_hit(f"用户{date}{_third_zh(x)}", "plan", 5)


_ZH_PAST = (
    r"(?:昨天(?:早上|上午|中午|下午|晚上)?|前天|昨晚|上上?(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]?|"
    r"上个?月|去年|前年|最近|刚刚|刚才|刚|今天(?:早上|上午|下午)?|今早|前几天|前段时间|那天|"
    r"之前|已经|终于|也|还)"
)
_ZH_EPISODE_VERB = (
    r"(?:去了|去过|参加了|参加过|开始了?|完成了|读了|读完了|看了|看完了|买了|画了|画完了|写了|"
    r"写完了|学会了|认识了|加入了|报名了|参观了|拜访了|做了|收到了|赢了|获得了|领养了|收养了|"
    r"尝试了|爬了|跑了|玩了|拍了|种了|烤了|学了)"
)
_ZH_EPISODE_EXCLUDE = re.compile(
    r"^(?:了|那里|这里|那儿|这儿|一下|一点|些|它|这个|那个|他|她|觉得|想|担心|明白|怀疑|后悔|喜欢|"
    r"好|过|吧|啊|呢)"
)


def _zh_episode(m: re.Match[str], depth: int) -> Hit | None:
    x = clean(m.group("x"))
    if not x or "你" in x or _ZH_EPISODE_EXCLUDE.match(x):
        return None
    when = (m.group("d1") or "") + (m.group("d2") or "")
    return _zh_hit(f"用户{when}{m.group('verb')}{_third_zh(x)}", "personal_fact", 6)


_ZH_WHEN = (
    r"(?P<when>(?:平时|周末|每天|平常|一般|通常|经常|有空(?:的时候|时)?|闲暇时|业余时间|晚上|"
    r"早上)?)"
)
_ZH_ADV = r"(?P<adv>(?:很|真|非常|特别|超级?|真的|挺|比较|一直|也|还|蛮|相当|十分|最)*)"
_ZH_RULES: list[Rule] = [
    (_zh(r"^(?:请|麻烦)?(?:你)?(?:记住|记得|别忘了|不要忘了)[：:，,]?(?P<x>.+)"), _zh_remember),
    (
        _zh(r"^(?:你|请)?(?:以后|今后|从现在开始|从现在起|从今以后|从今往后|往后)[，,]?(?P<x>.+)"),
        _zh_from_now_on,
    ),
    (_zh(r"^(?:你可以|你就|请|以后|就|大家都)*叫我(?P<x>.+)"), _zh_call_me),
    (_zh(r"^我(?:叫|名叫|的名字(?:是|叫))(?P<x>.+)"), _zh_name),
    (
        _zh(
            r"^(?:请|麻烦)?(?:你)?(?P<always>总是|始终|一直|每次都|都)?(?:用|使用)(?P<x>.{1,20}?)"
            r"(?P<verb>回答|回复|来回答|来回复|交流|说话|和我交流|跟我说话|写|沟通)"
        ),
        _zh_answer_in,
    ),
    (_zh(r"^(?:请)?(?:你)?(?:总是|始终|每次都|一定要|务必)(?P<x>.+)"), _zh_always),
    (_zh(r"^(?P<please>请|麻烦)?(?:你)?(?:不要|别|不用|请勿|千万别|千万不要)(?P<x>.+)"), _zh_dont),
    (
        _zh(
            r"^(?:请|麻烦)?(?:你的)?(?P<what>回答|回复|答案|解释)(?P<x>(?:请|要|尽量|最好|都|务必)*"
            r"(?:简短|简洁|详细|具体|短|精炼|通俗|正式|口语化|列点).*)"
        ),
        _zh_answer_style,
    ),
    (_zh(r"^我(?:对|吃)(?P<x>.+?)过敏"), _zh_fact("用户对{x}过敏", 8)),
    (_zh(r"^我(?P<x>.{1,10}?)过敏"), _zh_fact("用户对{x}过敏", 8)),
    (_zh(r"^我(?:最最?)喜欢的(?P<thing>.{1,15}?)是(?P<x>.+)"), _zh_favourite),
    (
        _zh(
            r"^我" + _ZH_WHEN + _ZH_ADV + r"(?P<verb>不喜欢|不太喜欢|讨厌|很讨厌|不爱|受不了|反感)"
            r"(?P<x>.+)"
        ),
        _zh_dislike,
    ),
    (_zh(r"^我(?:是|算是)?(?:一个|一名|个)?(?P<x>.+?)的(?:忠实)?粉丝"), _zh_fan),
    (
        _zh(r"^我" + _ZH_WHEN + _ZH_ADV + r"(?P<verb>喜欢|爱|偏爱|热爱|喜爱|迷上了|偏好)(?P<x>.+)"),
        _zh_like,
    ),
    (_zh(r"^我(?:一直|从小)?(?P<x>吃素|是素食(?:主义)?者|吃斋|不吃.+|不能吃.+|不喝.+)"), _zh_diet),
    (
        _zh(r"^我(?:今年|已经|现在)?(?P<n>\d{1,3}|" + _ZH_NUM + r"{1,3})(?:周)?岁"),
        _zh_age,
    ),
    (
        _zh(r"^我(?:现在|目前|一直|还)?(?:住在|居住在|定居在|住)(?P<x>.+)"),
        _zh_fact("用户住在{x}", 8),
    ),
    (
        _zh(
            r"^我(?:刚|最近|已经|刚刚|去年|上个月|前不久)*(?:从(?P<a>.+?))?(?:搬|搬家)(?:到|去)了?"
            r"(?P<x>.+)"
        ),
        _zh_moved,
    ),
    (
        _zh(r"^我(?:来自|老家(?:在|是)|的老家(?:在|是)|是从)(?P<x>.+?)(?:来的)?$"),
        _zh_fact("用户来自{x}", 7),
    ),
    (_zh(r"^我(?:出生在|出生于|生于|生在)(?P<x>.+)"), _zh_fact("用户出生在{x}", 7)),
    (
        _zh(
            r"^我(?:现在|目前|一直|在)?在(?P<x>.+?)(?P<verb>工作|上班|实习|任职|打工|上学|读书|读大学|念书)$"
        ),
        _zh_work,
    ),
    (
        _zh(r"^我(?:现在|目前|一直)?在(?P<x>.+?)(?P<verb>当|做|担任)(?P<y>.+)"),
        _zh_work_as,
    ),
    (_zh(r"^我的(?:工作|职业)是(?P<x>.+)"), _zh_fact("用户的工作是{x}", 8)),
    (
        _zh(
            r"^我的(?P<thing>生日|老家|家乡|母语|血型|星座|小名|昵称|英文名|邮箱|时区|目标|梦想|"
            r"宗教信仰|属相)(?P<verb>是|在)(?P<x>.+)"
        ),
        _zh_my_thing,
    ),
    (_zh(r"^我(?:会说|能说|讲)(?P<x>.+)"), _zh_speak),
    (_zh(r"^我(?:从事|做)(?P<x>.+?)(?:工作|行业)$"), _zh_fact("用户的工作是{x}", 8)),
    (
        _zh(
            r"^(?P<d1>" + _DATE_ZH + "|" + _ZH_PAST + r")?我(?P<d2>" + _ZH_PAST + r"{0,3})"
            r"(?P<verb>" + _ZH_EPISODE_VERB + r")(?P<x>.+)"
        ),
        _zh_episode,
    ),
    (_zh(r"^我的(?P<major>专业)是(?P<x>.+)"), _zh_study),
    (_zh(r"^我(?:现在|目前)?(?:正在|在)?(?:学习|学|读|念)(?P<major>)(?P<x>.+)"), _zh_study),
    (
        _zh(
            r"^我(?:的)?(?P<rel>" + _REL_ZH + r")(?P<rest>(?:叫|名叫|的名字|是|在|住在|今年|喜欢|"
            r"不喜欢|讨厌|也|刚|最近|有|会|已经|做|当|从事|养了|下个月|明天|在|怀孕|生病|退休|工作|上班|"
            r"读|学|开|养|特别|很|非常|对|不吃|不能).*)"
        ),
        _zh_relationship,
    ),
    (_zh(r"^我(?:们)?(?:家)?(?P<verb>有|养了|养着|养)(?P<x>.+)"), _zh_have),
    (
        _zh(
            r"^(?P<d1>" + _DATE_ZH + r")?我(?P<d2>" + _DATE_ZH + r")?(?:还|也|已经|正在|一直)?"
            r"(?P<verb>打算|计划|准备|想要|将要|正打算|要|将|会|想)(?P<x>.+)"
        ),
        _zh_plan,
    ),
    (_zh(r"^我是(?P<measure>一名|一个|一位|个|名)?(?P<x>.+)"), _zh_is),
    (_zh(r"^(?P<d1>" + _DATE_ZH + r")?我(?P<d2>" + _DATE_ZH + r")?(?P<x>.+)"), _zh_dated),
]


def _zh_clause(clause: str, depth: int = 0) -> Hit | None:
    clause = _FILLER_ZH.sub("", clause.strip()).strip("，, ")
    clause = clean(clause)
    if not clause:
        return None
    leading = _LEADING_DATE_ZH.match(clause)
    if leading:
        clause = "我" + leading.group("date") + leading.group("rest")[1:]
    return first_hit(_ZH_RULES, clause, depth)


def _is_question_zh(sentence: str) -> bool:
    body = clean(sentence)
    return (
        sentence.rstrip().endswith(("?", "？"))
        or bool(_QUESTION_END_ZH.search(body))
        or bool(_QUESTION_ZH.search(body))
    )


_ZH_PREFIX_ONLY = re.compile(r"(?:记住|记得|别忘了|不要忘了|以后|今后|从现在开始|从现在起)$")


def _zh_clauses(sentence: str) -> list[str]:
    pieces = [p.strip() for p in re.split(r"[，,]", sentence) if p.strip()]
    out: list[str] = []
    subject = False
    for piece in pieces:
        body = _FILLER_ZH.sub("", piece)
        if out and (not _ZH_CLAUSE_START.match(body) or _ZH_PREFIX_ONLY.search(out[-1])):
            out[-1] = f"{out[-1]}，{piece}"
            continue
        if subject and _ZH_SUBJECTLESS.match(body):
            body = "我" + body
        subject = body.startswith("我") or subject
        out.append(body)
    return out


def judge_zh(sentence: str) -> list[Hit]:
    if _is_question_zh(sentence) or _HYPOTHETICAL_ZH.search(sentence):
        return []
    hits = []
    for clause in _zh_clauses(clean(sentence)):
        found = _zh_clause(clause)
        if found is not None:
            hits.append(found)
    return hits
