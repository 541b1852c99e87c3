CREATE TABLE airports (
  airport_code TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT,
  country TEXT,
  elevation_ft INTEGER
);

CREATE TABLE aircraft (
  aircraft_id INTEGER PRIMARY KEY,
  model TEXT NOT NULL,
  manufacturer TEXT,
  capacity INTEGER,
  year_built INTEGER
);

CREATE TABLE flights (
  flight_id INTEGER PRIMARY KEY,
  flight_number TEXT NOT NULL,
  origin_code TEXT NOT NULL,
  destination_code TEXT NOT NULL,
  aircraft_id INTEGER,
  departure_date TEXT,
  duration_minutes INTEGER,
  base_fare REAL,
  FOREIGN KEY (origin_code) REFERENCES airports(airport_code),
  FOREIGN KEY (destination_code) REFERENCES airports(airport_code),
  FOREIGN KEY (aircraft_id) REFERENCES aircraft(aircraft_id)
);

CREATE TABLE passengers (
  passenger_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  nationality TEXT,
  birth_date TEXT,
  frequent_flyer_number TEXT
);

CREATE TABLE bookings (
  booking_id INTEGER PRIMARY KEY,
  flight_id INTEGER NOT NULL,
  passenger_id INTEGER NOT NULL,
  seat_class TEXT,
  seat_number TEXT,
  price_paid REAL,
  booking_date TEXT,
  FOREIGN KEY (flight_id) REFERENCES flights(flight_id),
  FOREIGN KEY (passenger_id) REFERENCES passengers(passenger_id)
);

INSERT INTO airports VALUES ('JFK', 'John F. Kennedy International Airport', 'New York', 'United States', 13);
INSERT INTO airports VALUES ('LAX', 'Los Angeles International Airport', 'Los Angeles', 'United States', 125);
INSERT INTO airports VALUES ('ORD', 'O''Hare International Airport', 'Chicago', 'United States', 672);
INSERT INTO airports VALUES ('LHR', 'Heathrow Airport', 'London', 'United Kingdom', 83);
INSERT INTO airports VALUES ('CDG', 'Charles de Gaulle Airport', 'Paris', 'France', 392);
INSERT INTO airports VALUES ('FRA', 'Frankfurt Airport', 'Frankfurt', 'Germany', 364);
INSERT INTO airports VALUES ('NRT', 'Narita International Airport', 'Tokyo', 'Japan', 141);
INSERT INTO airports VALUES ('SYD', 'Sydney Airport', 'Sydney', 'Australia', 21);
INSERT INTO airports VALUES ('DEN', 'Denver International Airport', 'Denver', 'United States', 5431);
INSERT INTO airports VALUES ('YYZ', 'Toronto Pearson International Airport', 'Toronto', 'Canada', 569);
INSERT INTO airports VALUES ('LGW', 'Gatwick Airport', 'London', 'United Kingdom', 202);

INSERT INTO aircraft VALUES (1, 'A320neo', 'Airbus', 180, 2018);
INSERT INTO aircraft VALUES (2, '737-800', 'Boeing', 189, 2012);
INSERT INTO aircraft VALUES (3, '787-9', 'Boeing', 290, 2016);
INSERT INTO aircraft VALUES (4, 'A350-900', 'Airbus', 325, 2019);
INSERT INTO aircraft VALUES (5, '777-300ER', 'Boeing', 396, 2014);
INSERT INTO aircraft VALUES (6, 'E175', 'Embraer', 76, 2015);
INSERT INTO aircraft VALUES (7, 'A321', 'Airbus', 220, 2010);
INSERT INTO aircraft VALUES (8, 'CRJ900', 'Bombardier', 90, 2009);

INSERT INTO flights VALUES (1, 'SK101', 'JFK', 'LHR', 3, '2024-06-01', 415, 640.0);
INSERT INTO flights VALUES (2, 'SK102', 'LHR', 'JFK', 3, '2024-06-03', 480, 610.0);
INSERT INTO flights VALUES (3, 'SK210', 'LAX', 'NRT', 5, '2024-06-02', 705, 890.0);
INSERT INTO flights VALUES (4, 'SK211', 'NRT', 'LAX', 5, '2024-06-09', 610, 870.5);
INSERT INTO flights VALUES (5, 'SK305', 'ORD', 'DEN', 2, '2024-06-04', 165, 189.99);
INSERT INTO flights VALUES (6, 'SK306', 'DEN', 'ORD', 2, '2024-06-05', 140, 179.99);
INSERT INTO flights VALUES (7, 'SK410', 'CDG', 'FRA', 1, '2024-06-06', 75, 120.0);
INSERT INTO flights VALUES (8, 'SK411', 'FRA', 'CDG', 1, '2024-06-07', 80, 115.0);
INSERT INTO flights VALUES (9, 'SK520', 'JFK', 'LAX', 7, '2024-06-08', 370, 329.5);
INSERT INTO flights VALUES (10, 'SK521', 'LAX', 'JFK', 7, '2024-06-10', 320, 339.5);
INSERT INTO flights VALUES (11, 'SK630', 'SYD', 'LAX', 4, '2024-06-11', 815, 1150.0);
INSERT INTO flights VALUES (12, 'SK640', 'YYZ', 'ORD', 6, '2024-06-12', 95, 145.0);
INSERT INTO flights VALUES (13, 'SK641', 'ORD', 'YYZ', 6, '2024-06-13', 100, 149.0);
INSERT INTO flights VALUES (14, 'SK750', 'LHR', 'CDG', 1, '2024-06-14', 80, 98.75);
INSERT INTO flights VALUES (15, 'SK760', 'FRA', 'NRT', 4, '2024-06-15', 700, 960.0);
INSERT INTO flights VALUES (16, 'SK870', 'DEN', 'LAX', 2, '2024-06-16', 150, NULL);
INSERT INTO flights VALUES (17, 'SK880', 'JFK', 'YYZ', 6, '2024-06-17', 110, 210.0);
INSERT INTO flights VALUES (18, 'SK101', 'JFK', 'LHR', 3, '2024-06-15', 415, 655.0);

INSERT INTO passengers VALUES (1, 'Amelia', 'Hughes', 'United Kingdom', '1987-02-11', 'FF10023');
INSERT INTO passengers VALUES (2, 'Benjamin', 'Clarke', 'United States', '1975-09-04', NULL);
INSERT INTO passengers VALUES (3, 'Camille', 'Laurent', 'France', '1992-12-19', 'FF10456');
INSERT INTO passengers VALUES (4, 'Daniel', 'Müller', 'Germany', '1980-05-27', 'FF10789');
INSERT INTO passengers VALUES (5, 'Emily', 'Chen', 'Canada', '1995-07-08', NULL);
INSERT INTO passengers VALUES (6, 'Felipe', 'Santos', 'Brazil', '1968-03-30', 'FF11002');
INSERT INTO passengers VALUES (7, 'Georgia', 'Papadopoulos', 'Greece', '2001-10-14', NULL);
INSERT INTO passengers VALUES (8, 'Hiroshi', 'Yamamoto', 'Japan', '1972-01-21', 'FF11345');
INSERT INTO passengers VALUES (9, 'Ingrid', 'Larsen', 'Norway', '1990-08-16', NULL);
INSERT INTO passengers VALUES (10, 'Jack', 'Thompson', 'Australia', '1984-11-02', 'FF11678');
INSERT INTO passengers VALUES (11, 'Kavya', 'Iyer', 'India', '1998-04-25', NULL);
INSERT INTO passengers VALUES (12, 'Lucas', 'Martin', 'France', '1979-06-13', 'FF12001');
INSERT INTO passengers VALUES (13, 'Maya', 'Goldberg', 'United States', '1993-02-28', 'FF12334');
INSERT INTO passengers VALUES (14, 'Nathan', 'Clarke', 'United Kingdom', '1966-12-05', NULL);
INSERT INTO passengers VALUES (15, 'Olivia', 'Brown', 'United States', '2003-09-09', NULL);

INSERT INTO bookings VALUES (1, 1, 1, 'Business', '2A', 2150.0, '2024-04-02');
INSERT INTO bookings VALUES (2, 1, 2, 'Economy', '34C', 640.0, '2024-04-10');
INSERT INTO bookings VALUES (3, 1, 13, 'Economy', '35D', 655.5, '2024-04-18');
INSERT INTO bookings VALUES (4, 2, 1, 'Business', '3A', 2080.0, '2024-04-02');
INSERT INTO bookings VALUES (5, 3, 8, 'First', '1A', 5400.0, '2024-03-15');
INSERT INTO bookings VALUES (6, 3, 10, 'Economy', '41B', 910.0, '2024-04-20');
INSERT INTO bookings VALUES (7, 4, 8, 'First', '1A', 5250.0, '2024-03-15');
INSERT INTO bookings VALUES (8, 5, 2, 'Economy', '18F', 189.99, '2024-05-01');
INSERT INTO bookings VALUES (9, 5, 13, 'Economy', '22A', 210.0, '2024-05-20');
INSERT INTO bookings VALUES (10, 6, 2, 'Economy', '17C', 179.99, '2024-05-01');
INSERT INTO bookings VALUES (11, 7, 3, 'Economy', '12D', 120.0, '2024-05-05');
INSERT INTO bookings VALUES (12, 7, 12, 'Business', '2C', 340.0, '2024-05-11');
INSERT INTO bookings VALUES (13, 8, 3, 'Economy', '14A', 125.0, '2024-05-05');
INSERT INTO bookings VALUES (14, 9, 13, 'Business', '4B', 980.0, '2024-05-02');
INSERT INTO bookings VALUES (15, 9, 5, 'Economy', '27E', 329.5, '2024-05-09');
INSERT INTO bookings VALUES (16, 10, 5, 'Economy', '25E', 339.5, '2024-05-09');
INSERT INTO bookings VALUES (17, 11, 10, 'Business', '5K', 3600.0, '2024-04-01');
INSERT INTO bookings VALUES (18, 11, 9, 'Economy', '52H', 1150.0, '2024-04-22');
INSERT INTO bookings VALUES (19, 12, 5, 'Economy', '9A', 145.0, '2024-05-25');
INSERT INTO bookings VALUES (20, 13, 11, 'Economy', '10C', 149.0, '2024-05-28');
INSERT INTO bookings VALUES (21, 14, 12, 'Economy', '15B', 98.75, '2024-05-30');
INSERT INTO bookings VALUES (22, 15, 4, 'Business', '6A', 2890.0, '2024-04-12');
INSERT INTO bookings VALUES (23, 15, 8, 'Economy', '44J', 960.0, '2024-05-03');
INSERT INTO bookings VALUES (24, 17, 6, 'Economy', '11D', 210.0, '2024-05-14');
INSERT INTO bookings VALUES (25, 17, 7, 'Economy', '12F', 225.0, '2024-06-01');
INSERT INTO bookings VALUES (26, 18, 1, 'First', '1K', 4800.0, '2024-05-12');
INSERT INTO bookings VALUES (27, 18, 4, 'Economy', '30A', 655.0, '2024-05-19');
INSERT INTO bookings VALUES (28, 3, 11, 'Economy', '40G', 890.0, '2024-05-21');
INSERT INTO bookings VALUES (29, 9, 6, 'Economy', NULL, 329.5, '2024-05-30');
INSERT INTO bookings VALUES (30, 12, 9, 'Economy', NULL, 160.0, '2024-06-02');
