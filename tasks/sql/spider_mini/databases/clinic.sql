CREATE TABLE doctors (
  doctor_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  specialty TEXT,
  years_experience INTEGER,
  consultation_fee REAL
);

CREATE TABLE patients (
  patient_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  birth_date TEXT,
  gender TEXT,
  city TEXT,
  phone TEXT
);

CREATE TABLE appointments (
  appointment_id INTEGER PRIMARY KEY,
  patient_id INTEGER NOT NULL,
  doctor_id INTEGER NOT NULL,
  appointment_date TEXT,
  status TEXT,
  fee_paid REAL,
  FOREIGN KEY (patient_id) REFERENCES patients(patient_id),
  FOREIGN KEY (doctor_id) REFERENCES doctors(doctor_id)
);

CREATE TABLE medications (
  medication_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  manufacturer TEXT,
  unit_price REAL
);

CREATE TABLE prescriptions (
  prescription_id INTEGER PRIMARY KEY,
  appointment_id INTEGER NOT NULL,
  medication_id INTEGER NOT NULL,
  dosage TEXT,
  quantity INTEGER,
  FOREIGN KEY (appointment_id) REFERENCES appointments(appointment_id),
  FOREIGN KEY (medication_id) REFERENCES medications(medication_id)
);

INSERT INTO doctors VALUES (1, 'Dr. Sarah Okafor', 'Cardiology', 18, 150.0);
INSERT INTO doctors VALUES (2, 'Dr. Miguel Alvarez', 'Pediatrics', 9, 95.5);
INSERT INTO doctors VALUES (3, 'Dr. Priya Raman', 'Dermatology', 12, 120.0);
INSERT INTO doctors VALUES (4, 'Dr. Thomas Berg', 'Cardiology', 25, 175.0);
INSERT INTO doctors VALUES (5, 'Dr. Yuki Sato', 'General Practice', 6, 80.0);
INSERT INTO doctors VALUES (6, 'Dr. Hannah Weiss', 'Neurology', 15, 160.0);
INSERT INTO doctors VALUES (7, 'Dr. Omar Haddad', 'General Practice', 11, 85.0);
INSERT INTO doctors VALUES (8, 'Dr. Lucia Ferreira', 'Pediatrics', 4, 90.0);
INSERT INTO doctors VALUES (9, 'Dr. James McKenzie', 'Orthopedics', 20, 140.25);
INSERT INTO doctors VALUES (10, 'Dr. Ana Kovac', 'Dermatology', 3, NULL);

INSERT INTO patients VALUES (1, 'Liam Carter', '1985-04-12', 'M', 'Boston', '617-555-0101');
INSERT INTO patients VALUES (2, 'Sofia Moreno', '1992-09-30', 'F', 'Cambridge', NULL);
INSERT INTO patients VALUES (3, 'Ethan Brooks', '2015-06-18', 'M', 'Boston', '617-555-0144');
INSERT INTO patients VALUES (4, 'Ava Patel', '1978-01-25', 'F', 'Somerville', '617-555-0178');
INSERT INTO patients VALUES (5, 'Noah Schmidt', '1960-11-03', 'M', 'Boston', NULL);
INSERT INTO patients VALUES (6, 'Mia Johansson', '2018-02-14', 'F', 'Cambridge', '617-555-0190');
INSERT INTO patients VALUES (7, 'Lucas Dubois', '1949-07-22', 'M', 'Quincy', '617-555-0112');
INSERT INTO patients VALUES (8, 'Chloe Tran', '2001-12-08', 'F', 'Boston', '617-555-0133');
INSERT INTO patients VALUES (9, 'Oliver Mensah', '1988-03-17', 'M', 'Somerville', NULL);
INSERT INTO patients VALUES (10, 'Isla MacLeod', '1970-05-29', 'F', 'Quincy', '617-555-0165');
INSERT INTO patients VALUES (11, 'Mason Reyes', '2012-10-10', 'M', 'Cambridge', '617-555-0187');
INSERT INTO patients VALUES (12, 'Zoe Andersen', '1995-08-03', 'F', 'Boston', NULL);
INSERT INTO patients VALUES (13, 'Elijah Wong', '1955-02-27', 'M', 'Brookline', '617-555-0121');
INSERT INTO patients VALUES (14, 'Harper Quinn', '1999-06-06', 'F', 'Brookline', '617-555-0156');
INSERT INTO patients VALUES (15, 'Leo Nakamura', '1983-11-19', 'M', 'Cambridge', '617-555-0102');
INSERT INTO patients VALUES (16, 'Ruby Castillo', '2007-04-01', 'F', 'Somerville', NULL);

INSERT INTO appointments VALUES (1, 1, 1, '2024-01-08', 'Completed', 150.0);
INSERT INTO appointments VALUES (2, 2, 3, '2024-01-09', 'Completed', 120.0);
INSERT INTO appointments VALUES (3, 3, 2, '2024-01-10', 'Completed', 95.5);
INSERT INTO appointments VALUES (4, 4, 5, '2024-01-15', 'Completed', 80.0);
INSERT INTO appointments VALUES (5, 5, 4, '2024-01-16', 'Completed', 175.0);
INSERT INTO appointments VALUES (6, 6, 8, '2024-01-22', 'Cancelled', NULL);
INSERT INTO appointments VALUES (7, 7, 1, '2024-01-23', 'Completed', 150.0);
INSERT INTO appointments VALUES (8, 8, 3, '2024-02-02', 'Completed', 120.0);
INSERT INTO appointments VALUES (9, 9, 7, '2024-02-05', 'Completed', 85.0);
INSERT INTO appointments VALUES (10, 10, 6, '2024-02-07', 'Completed', 160.0);
INSERT INTO appointments VALUES (11, 11, 2, '2024-02-12', 'Completed', 95.5);
INSERT INTO appointments VALUES (12, 12, 5, '2024-02-14', 'Cancelled', NULL);
INSERT INTO appointments VALUES (13, 13, 4, '2024-02-20', 'Completed', 175.0);
INSERT INTO appointments VALUES (14, 14, 9, '2024-02-26', 'Completed', 140.25);
INSERT INTO appointments VALUES (15, 1, 5, '2024-03-01', 'Completed', 80.0);
INSERT INTO appointments VALUES (16, 5, 1, '2024-03-04', 'Completed', 150.0);
INSERT INTO appointments VALUES (17, 7, 6, '2024-03-11', 'Completed', 160.0);
INSERT INTO appointments VALUES (18, 3, 8, '2024-03-13', 'Completed', 90.0);
INSERT INTO appointments VALUES (19, 8, 7, '2024-03-18', 'Cancelled', NULL);
INSERT INTO appointments VALUES (20, 4, 4, '2024-03-21', 'Completed', 175.0);
INSERT INTO appointments VALUES (21, 2, 5, '2024-04-02', 'Completed', 80.0);
INSERT INTO appointments VALUES (22, 13, 1, '2024-04-09', 'Completed', 150.0);
INSERT INTO appointments VALUES (23, 6, 2, '2024-04-15', 'Completed', 95.5);
INSERT INTO appointments VALUES (24, 10, 3, '2024-04-22', 'Scheduled', NULL);
INSERT INTO appointments VALUES (25, 9, 4, '2024-05-06', 'Scheduled', NULL);
INSERT INTO appointments VALUES (26, 12, 7, '2024-05-08', 'Scheduled', NULL);
INSERT INTO appointments VALUES (27, 14, 6, '2024-05-13', 'Scheduled', NULL);
INSERT INTO appointments VALUES (28, 7, 4, '2024-05-20', 'Scheduled', NULL);

INSERT INTO medications VALUES (1, 'Atorvastatin', 'Pfizer', 0.85);
INSERT INTO medications VALUES (2, 'Amoxicillin', 'Sandoz', 0.42);
INSERT INTO medications VALUES (3, 'Ibuprofen', 'Bayer', 0.15);
INSERT INTO medications VALUES (4, 'Metoprolol', 'Novartis', 0.6);
INSERT INTO medications VALUES (5, 'Hydrocortisone Cream', 'Johnson & Johnson', 7.5);
INSERT INTO medications VALUES (6, 'Levetiracetam', 'UCB', 1.9);
INSERT INTO medications VALUES (7, 'Cetirizine', 'Bayer', 0.25);
INSERT INTO medications VALUES (8, 'Lisinopril', 'Pfizer', 0.35);
INSERT INTO medications VALUES (9, 'Isotretinoin', 'Roche', 3.2);
INSERT INTO medications VALUES (10, 'Naproxen', 'Bayer', 0.3);
INSERT INTO medications VALUES (11, 'Gabapentin', 'Pfizer', 0.95);

INSERT INTO prescriptions VALUES (1, 1, 1, '20 mg daily', 30);
INSERT INTO prescriptions VALUES (2, 1, 8, '10 mg daily', 30);
INSERT INTO prescriptions VALUES (3, 2, 9, '40 mg daily', 60);
INSERT INTO prescriptions VALUES (4, 3, 2, '250 mg three times daily', 21);
INSERT INTO prescriptions VALUES (5, 14, 10, '500 mg twice daily', 20);
INSERT INTO prescriptions VALUES (6, 5, 4, '50 mg twice daily', 60);
INSERT INTO prescriptions VALUES (7, 7, 1, '40 mg daily', 90);
INSERT INTO prescriptions VALUES (8, 7, 4, '25 mg twice daily', 60);
INSERT INTO prescriptions VALUES (9, 8, 5, 'apply twice daily', 1);
INSERT INTO prescriptions VALUES (10, 20, 7, '10 mg daily', 30);
INSERT INTO prescriptions VALUES (11, 10, 6, '500 mg twice daily', 60);
INSERT INTO prescriptions VALUES (12, 11, 2, '250 mg three times daily', 15);
INSERT INTO prescriptions VALUES (13, 13, 8, '20 mg daily', 90);
INSERT INTO prescriptions VALUES (14, 14, 3, '600 mg three times daily', 30);
INSERT INTO prescriptions VALUES (15, 15, 7, '10 mg daily', 14);
INSERT INTO prescriptions VALUES (16, 16, 1, '20 mg daily', 30);
INSERT INTO prescriptions VALUES (17, 17, 6, '750 mg twice daily', 60);
INSERT INTO prescriptions VALUES (18, 18, 2, '125 mg three times daily', 21);
INSERT INTO prescriptions VALUES (19, 20, 3, '400 mg twice daily', 40);
INSERT INTO prescriptions VALUES (20, 21, 5, 'apply once daily', 2);
INSERT INTO prescriptions VALUES (21, 22, 4, '50 mg twice daily', 60);
INSERT INTO prescriptions VALUES (22, 23, 7, '5 mg daily', 10);
