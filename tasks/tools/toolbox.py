"""Tool definitions for the synthetic tool-calling generator (our own, written for this project).

Each :class:`Tool` has a JSON-schema signature (shown to the model in the system prompt) and a
``phrase`` function that samples arguments and the matching request clause, e.g.
``({"city": "Lisbon"}, "check the current weather in Lisbon")``. Descriptions are kept short
because training runs on a small CPU model where prompt length dominates cost.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

Phrase = Callable[[random.Random], tuple[dict, str]]


@dataclass(frozen=True)
class Tool:
    """One callable tool: its schema and a sampler of (arguments, request clause)."""

    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    phrase: Phrase

    def schema(self) -> dict[str, Any]:
        """The tool as the prompt lists it (BFCL / OpenAI-style JSON schema)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "dict",
                "properties": self.properties,
                "required": list(self.required),
            },
        }


def _p(type_: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


# ------------------------------------------------------------------------------------------------
# Value pools
# ------------------------------------------------------------------------------------------------
CITIES = ["Paris", "Tokyo", "Lisbon", "Nairobi", "Toronto", "Sydney", "Berlin", "Lima", "Seoul",
          "Cairo", "Oslo", "Denver", "Mumbai", "Madrid", "Chicago", "Hanoi", "Dublin", "Quito"]
PEOPLE = ["Alice", "Bob", "Carmen", "Deepak", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas"]
CURRENCIES = {"USD": "US dollars", "EUR": "euros", "GBP": "British pounds", "JPY": "yen",
              "CAD": "Canadian dollars", "CHF": "Swiss francs", "INR": "rupees"}
STOCKS = ["AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "GOOGL", "META", "IBM", "ORCL", "SAP"]
LANGUAGES = ["French", "Spanish", "German", "Japanese", "Italian", "Korean", "Portuguese"]
PHRASES = ["good morning", "where is the station", "thank you very much", "see you tomorrow",
           "how much does this cost", "I am lost"]
PLACE_KINDS = ["restaurant", "cafe", "pharmacy", "gas station", "museum", "park", "bakery"]
TOPICS = ["technology", "sports", "climate", "science", "economy", "health", "travel"]
WORDS = ["serendipity", "ephemeral", "ubiquitous", "laconic", "quixotic", "sonder", "petrichor"]
EVENTS = ["team sync", "dentist appointment", "project review", "lunch with Sam", "yoga class",
          "budget meeting", "code review"]
REMINDERS = ["call mom", "water the plants", "pay the rent", "buy milk", "take the medicine",
             "submit the report"]
SONGS = [("Yesterday", "The Beatles"), ("Hello", "Adele"), ("Halo", "Beyonce"),
         ("Clocks", "Coldplay"), ("Vogue", "Madonna"), ("Believer", "Imagine Dragons")]
LENGTHS = ["meters", "feet", "kilometers", "miles", "inches", "centimeters"]
WEIGHTS = ["kilograms", "pounds", "grams", "ounces"]
MODES = ["driving", "walking", "transit", "cycling"]
MESSAGES = ["I am running late", "see you at 7", "the meeting moved to Friday",
            "happy birthday", "call me when you can", "dinner is ready"]


def _date(rng: random.Random) -> str:
    return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(7, 20):02d}:{rng.choice(['00', '15', '30', '45'])}"


# ------------------------------------------------------------------------------------------------
# Phrase functions: sample arguments and the clause that asks for exactly them
# ------------------------------------------------------------------------------------------------
def _weather(rng):
    city = rng.choice(CITIES)
    if rng.random() < 0.35:
        unit = rng.choice(["celsius", "fahrenheit"])
        return {"city": city, "unit": unit}, f"tell me the current weather in {city} in {unit}"
    return {"city": city}, rng.choice([f"check the current weather in {city}",
                                       f"tell me how the weather is in {city} right now"])


def _forecast(rng):
    city, days = rng.choice(CITIES), rng.randint(2, 7)
    return {"city": city, "days": days}, rng.choice(
        [f"get a {days}-day forecast for {city}", f"show the weather forecast for {city} "
         f"for the next {days} days"])


def _convert_units(rng):
    pool = rng.choice([LENGTHS, WEIGHTS])
    src, dst = rng.sample(pool, 2)
    value = rng.choice([rng.randint(1, 500), round(rng.uniform(0.5, 99), 1)])
    return ({"value": value, "from_unit": src, "to_unit": dst},
            f"convert {value} {src} to {dst}")


def _convert_currency(rng):
    src, dst = rng.sample(sorted(CURRENCIES), 2)
    amount = rng.choice([20, 50, 75, 100, 250, 1000, 1200])
    # The request names the currency; the argument wants its ISO code.
    return ({"amount": amount, "from_currency": src, "to_currency": dst},
            f"convert {amount} {CURRENCIES[src]} into {CURRENCIES[dst]}")


def _stock(rng):
    symbol = rng.choice(STOCKS)
    return {"symbol": symbol}, rng.choice([f"get the latest stock price of {symbol}",
                                           f"look up how {symbol} shares are trading"])


def _create_event(rng):
    title, date, time = rng.choice(EVENTS), _date(rng), _time(rng)
    args = {"title": title, "date": date, "time": time}
    if rng.random() < 0.4:
        args["duration_minutes"] = rng.choice([15, 30, 45, 60, 90])
        return args, (f"add a calendar event '{title}' on {date} at {time} lasting "
                      f"{args['duration_minutes']} minutes")
    return args, f"schedule '{title}' on {date} at {time} in my calendar"


def _list_events(rng):
    date = _date(rng)
    return {"date": date}, rng.choice([f"list my calendar events on {date}",
                                       f"show what is on my calendar for {date}"])


def _send_message(rng):
    person, text = rng.choice(PEOPLE), rng.choice(MESSAGES)
    return {"recipient": person, "text": text}, f"text {person} saying '{text}'"


def _send_email(rng):
    person = rng.choice(PEOPLE)
    address = f"{person.lower()}@example.com"
    subject = rng.choice(["Quarterly report", "Trip plans", "Invoice", "Weekend", "Follow-up"])
    return ({"to": address, "subject": subject},
            f"email {address} with the subject '{subject}'")


def _directions(rng):
    origin, destination = rng.sample(CITIES, 2)
    if rng.random() < 0.5:
        mode = rng.choice(MODES)
        return ({"origin": origin, "destination": destination, "mode": mode},
                f"get {mode} directions from {origin} to {destination}")
    return ({"origin": origin, "destination": destination},
            f"find a route from {origin} to {destination}")


def _nearby(rng):
    city, kind = rng.choice(CITIES), rng.choice(PLACE_KINDS)
    if rng.random() < 0.4:
        radius = rng.choice([1, 2, 5, 10])
        return ({"location": city, "category": kind, "radius_km": radius},
                f"find a {kind} within {radius} km of {city}")
    return {"location": city, "category": kind}, f"find a {kind} near {city}"


def _timer(rng):
    minutes = rng.choice([3, 5, 10, 12, 15, 20, 25, 30, 45])
    return {"minutes": minutes}, rng.choice([f"set a timer for {minutes} minutes",
                                             f"start a {minutes}-minute timer"])


def _reminder(rng):
    text, time = rng.choice(REMINDERS), _time(rng)
    return {"text": text, "time": time}, f"remind me to {text} at {time}"


def _translate(rng):
    text, lang = rng.choice(PHRASES), rng.choice(LANGUAGES)
    return ({"text": text, "target_language": lang},
            f"translate '{text}' into {lang}")


def _tip(rng):
    bill, pct = rng.choice([24.5, 38, 56.8, 80, 112.4, 150]), rng.choice([10, 15, 18, 20, 25])
    return ({"bill_amount": bill, "tip_percent": pct},
            f"work out a {pct}% tip on a bill of {bill} dollars")


def _loan(rng):
    principal = rng.choice([5000, 12000, 25000, 150000, 300000])
    rate, years = rng.choice([3.5, 4.2, 5.0, 6.75]), rng.choice([3, 5, 10, 15, 30])
    return ({"principal": principal, "annual_rate": rate, "years": years},
            f"compute the monthly payment on a {principal} loan at {rate}% for {years} years")


def _flights(rng):
    origin, destination = rng.sample(CITIES, 2)
    date = _date(rng)
    return ({"origin": origin, "destination": destination, "date": date},
            f"search flights from {origin} to {destination} on {date}")


def _hotel(rng):
    city, date, nights = rng.choice(CITIES), _date(rng), rng.randint(1, 6)
    return ({"city": city, "check_in": date, "nights": nights},
            f"check hotel availability in {city} from {date} for {nights} nights")


def _news(rng):
    topic = rng.choice(TOPICS)
    if rng.random() < 0.4:
        count = rng.choice([3, 5, 10])
        return {"topic": topic, "count": count}, f"get the top {count} {topic} headlines"
    return {"topic": topic}, f"show me the latest {topic} news"


def _time_in(rng):
    city = rng.choice(CITIES)
    return {"city": city}, rng.choice([f"tell me the local time in {city}",
                                       f"find out what time it is in {city}"])


def _define(rng):
    word = rng.choice(WORDS)
    return {"word": word}, rng.choice([f"define the word '{word}'",
                                       f"look up the meaning of '{word}'"])


def _play(rng):
    title, artist = rng.choice(SONGS)
    return {"title": title, "artist": artist}, f"play {title} by {artist}"


TOOLS: tuple[Tool, ...] = (
    Tool("get_weather", "Current weather in a city.",
         {"city": _p("string", "City name."),
          "unit": _p("string", "Temperature unit.", enum=["celsius", "fahrenheit"])},
         ("city",), _weather),
    Tool("get_forecast", "Daily weather forecast for a city.",
         {"city": _p("string", "City name."), "days": _p("integer", "Number of days, 1-7.")},
         ("city", "days"), _forecast),
    Tool("convert_units", "Convert a length or weight between units.",
         {"value": _p("float", "Amount to convert."), "from_unit": _p("string", "Source unit."),
          "to_unit": _p("string", "Target unit.")},
         ("value", "from_unit", "to_unit"), _convert_units),
    Tool("convert_currency", "Convert money between currencies (ISO codes).",
         {"amount": _p("float", "Amount."), "from_currency": _p("string", "ISO code, e.g. USD."),
          "to_currency": _p("string", "ISO code, e.g. EUR.")},
         ("amount", "from_currency", "to_currency"), _convert_currency),
    Tool("get_stock_price", "Latest price of a stock.",
         {"symbol": _p("string", "Ticker symbol.")}, ("symbol",), _stock),
    Tool("create_event", "Add an event to the calendar.",
         {"title": _p("string", "Event title."), "date": _p("string", "YYYY-MM-DD."),
          "time": _p("string", "HH:MM, 24h."),
          "duration_minutes": _p("integer", "Length in minutes.")},
         ("title", "date", "time"), _create_event),
    Tool("list_events", "List calendar events on a date.",
         {"date": _p("string", "YYYY-MM-DD.")}, ("date",), _list_events),
    Tool("send_message", "Send a text message to a contact.",
         {"recipient": _p("string", "Contact name."), "text": _p("string", "Message.")},
         ("recipient", "text"), _send_message),
    Tool("send_email", "Send an email.",
         {"to": _p("string", "Email address."), "subject": _p("string", "Subject line.")},
         ("to", "subject"), _send_email),
    Tool("get_directions", "Route between two places.",
         {"origin": _p("string", "Start."), "destination": _p("string", "End."),
          "mode": _p("string", "Travel mode.", enum=MODES)},
         ("origin", "destination"), _directions),
    Tool("find_places", "Find places of a kind near a location.",
         {"location": _p("string", "City or address."),
          "category": _p("string", "Kind of place."),
          "radius_km": _p("integer", "Search radius in km.")},
         ("location", "category"), _nearby),
    Tool("set_timer", "Start a countdown timer.",
         {"minutes": _p("integer", "Duration in minutes.")}, ("minutes",), _timer),
    Tool("set_reminder", "Create a reminder.",
         {"text": _p("string", "What to remember."), "time": _p("string", "HH:MM, 24h.")},
         ("text", "time"), _reminder),
    Tool("translate_text", "Translate text into a language.",
         {"text": _p("string", "Text."), "target_language": _p("string", "Language name.")},
         ("text", "target_language"), _translate),
    Tool("calculate_tip", "Tip for a bill.",
         {"bill_amount": _p("float", "Bill total."), "tip_percent": _p("integer", "Percent.")},
         ("bill_amount", "tip_percent"), _tip),
    Tool("loan_payment", "Monthly payment of a loan.",
         {"principal": _p("float", "Amount borrowed."),
          "annual_rate": _p("float", "Yearly interest in percent."),
          "years": _p("integer", "Term in years.")},
         ("principal", "annual_rate", "years"), _loan),
    Tool("search_flights", "Find flights on a date.",
         {"origin": _p("string", "From city."), "destination": _p("string", "To city."),
          "date": _p("string", "YYYY-MM-DD.")},
         ("origin", "destination", "date"), _flights),
    Tool("hotel_availability", "Hotel rooms available in a city.",
         {"city": _p("string", "City."), "check_in": _p("string", "YYYY-MM-DD."),
          "nights": _p("integer", "Number of nights.")},
         ("city", "check_in", "nights"), _hotel),
    Tool("get_news", "Latest news headlines on a topic.",
         {"topic": _p("string", "Topic."), "count": _p("integer", "How many headlines.")},
         ("topic",), _news),
    Tool("local_time", "Current local time in a city.",
         {"city": _p("string", "City name.")}, ("city",), _time_in),
    Tool("define_word", "Dictionary definition of a word.",
         {"word": _p("string", "The word.")}, ("word",), _define),
    Tool("play_song", "Play a song.",
         {"title": _p("string", "Song title."), "artist": _p("string", "Artist.")},
         ("title", "artist"), _play),
)

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}
